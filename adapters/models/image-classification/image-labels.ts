import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { ModelFolder } from '../model-files.js';

/**
 * Class names of an image classifier: config.json `id2label`, or a label file next to the graph,
 * one label per line, as the ONNX model zoo and many exports ship them (`synset.txt`,
 * `labels.txt`, `imagenet_classes.txt`...). ImageNet synset lines ("n01440764 tench, Tinca tinca")
 * become their first human name ("tench"), the name ImageNet tables and labels.tsv files use.
 */

/** Preferred label file names, best first; any other `.txt` with the right line count also qualifies. */
const PREFERRED = ['synset.txt', 'labels.txt', 'imagenet_classes.txt', 'classes.txt', 'class_names.txt'];
const SYNSET_LINE = /^n\d{8}\s+(.+)$/;

/** `n01440764 tench, Tinca tinca` → `tench`; other lines as they are (trimmed). */
export function labelFromLine(line: string): string {
  const trimmed = line.trim();
  const synset = SYNSET_LINE.exec(trimmed);
  if (synset === null) return trimmed;
  const names = synset[1] ?? '';
  return (names.split(',')[0] ?? names).trim();
}

export function parseLabelFile(text: string): string[] {
  return text
    .split(/\r?\n/)
    .filter((line) => line.trim() !== '')
    .map(labelFromLine);
}

/** `.txt` files at the folder root or beside the graph, preferred names first. */
export function labelFileCandidates(folder: ModelFolder, graph: string): string[] {
  const graphDir = graph.includes('/') ? graph.slice(0, graph.lastIndexOf('/') + 1) : '';
  const nearby = folder.files.filter((file) => {
    if (!file.toLowerCase().endsWith('.txt')) return false;
    const dir = file.includes('/') ? file.slice(0, file.lastIndexOf('/') + 1) : '';
    return dir === '' || dir === graphDir;
  });
  const rank = (file: string): number => {
    const base = file.slice(file.lastIndexOf('/') + 1).toLowerCase();
    const at = PREFERRED.indexOf(base);
    return at < 0 ? PREFERRED.length : at;
  };
  return nearby.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

/** True when a file name looks like a label file (detection evidence, before reading it). */
export function isLabelFileName(file: string): boolean {
  return PREFERRED.includes(file.slice(file.lastIndexOf('/') + 1).toLowerCase());
}

/**
 * The first candidate whose label count equals `classes` (any count when the graph does not fix
 * it), or null when none fits.
 */
export async function findLabelFile(folder: ModelFolder, graph: string, classes: number | null): Promise<{ file: string; labels: string[] } | null> {
  for (const file of labelFileCandidates(folder, graph)) {
    const text = await folder.text(file);
    if (text === undefined) continue;
    const labels = parseLabelFile(text);
    if (labels.length > 0 && (classes === null || labels.length === classes)) return { file, labels };
  }
  return null;
}

/** id2label → labels in id order; ids must be 0..n-1. */
export function labelsFromId2Label(id2label: Record<string, string>, model: string): string[] {
  const entries = Object.entries(id2label).map(([id, label]) => [Number(id), label] as const);
  const labels: string[] = [];
  for (const [id, label] of entries) {
    if (!Number.isInteger(id) || id < 0 || id >= entries.length) {
      throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${model}: config.json id2label has id "${id}"; ids must be 0..${entries.length - 1}`);
    }
    labels[id] = label;
  }
  return labels;
}
