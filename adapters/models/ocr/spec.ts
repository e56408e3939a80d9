import type { FamilySpec } from '../family-spec.js';

/** OCR (PaddleOCR layout): a detector and a recognizer graph plus a character list. */

const CHARSET_FILE = /(keys|dict|charset)[^/]*\.txt$/i;

function role(name: string, stage: 'det' | 'rec' | 'cls'): boolean {
  const base = name.slice(name.lastIndexOf('/') + 1).toLowerCase();
  return new RegExp(`(^|[^a-z])${stage}([^a-z]|$)`).test(base);
}

/** The component of each stage: a key named after it, else a graph whose file name says it. */
export function findComponents(onnx: Record<string, string>): { det?: string; rec?: string; cls?: string } {
  const found: { det?: string; rec?: string; cls?: string } = {};
  for (const stage of ['det', 'rec', 'cls'] as const) {
    const key = stage in onnx ? stage : Object.keys(onnx).find((k) => role(k, stage) || role(onnx[k] ?? '', stage));
    if (key !== undefined) found[stage] = key;
  }
  return found;
}

export function findCharset(files: readonly string[]): string | undefined {
  const candidates = files.filter((file) => CHARSET_FILE.test(file));
  return candidates.find((file) => /ppocr_keys/i.test(file)) ?? candidates[0];
}

export const ocrSpec: FamilySpec = {
  capabilities: { inputs: ['image'], encode: [], defaultOutputs: [], score: null, extract: true },

  match(evidence) {
    const components = findComponents(evidence.onnx);
    if (components.det === undefined || components.rec === undefined) return 0;
    return findCharset(evidence.folder.files) === undefined ? 0 : 100;
  },
};
