import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { FAMILIES } from '../../../../adapters/models/registry.js';
import { importGraph } from '../../../helpers/import-graph.js';

/**
 * The shape of adapters/models: one folder per family that imports no other family (shared
 * steps live in text/, image/ and the contract files), a registry whose static imports stay light
 * (detection and capability checks run on the main thread and in every prep thread, so they must
 * not pull in onnxruntime, tokenizers or sharp), and thread machinery outside the models folder.
 */

const ROOT = fileURLToPath(new URL('../../../..', import.meta.url));
const MODELS = 'adapters/models';
const graph = importGraph(ROOT, ['adapters']);
const families = Object.keys(FAMILIES);

function folderOf(file: string): string | null {
  if (!file.startsWith(`${MODELS}/`)) return null;
  const parts = file.slice(MODELS.length + 1).split('/');
  return parts.length > 1 ? (parts[0] ?? null) : null;
}

/** Every file the given one reaches through static imports (type imports included), itself too. */
function closure(start: string): Set<string> {
  const seen = new Set<string>([start]);
  const queue = [start];
  for (let file = queue.pop(); file !== undefined; file = queue.pop()) {
    for (const next of graph.edges.get(file) ?? []) {
      if (!seen.has(next)) {
        seen.add(next);
        queue.push(next);
      }
    }
  }
  return seen;
}

describe('adapters/models structure', () => {
  it('every registry family has its own folder with a spec and an adapter', () => {
    for (const family of families) {
      expect(graph.edges.has(`${MODELS}/${family}/spec.ts`), `${family}/spec.ts`).toBe(true);
      expect(graph.edges.has(`${MODELS}/${family}/${family}.ts`), `${family}/${family}.ts`).toBe(true);
    }
  });

  it('no family imports another family', () => {
    const crossings: string[] = [];
    for (const [file, targets] of graph.edges) {
      const own = folderOf(file);
      if (own === null || !families.includes(own)) continue;
      for (const target of targets) {
        const theirs = folderOf(target);
        if (theirs !== null && theirs !== own && families.includes(theirs)) crossings.push(`${file} → ${target}`);
      }
    }
    expect(crossings).toEqual([]);
  });

  it('the registry (detection, capabilities) reaches no runtime, tokenizer, image or adapter module', () => {
    const reached = [...closure(`${MODELS}/registry.ts`)].sort();
    // Its own spec files are reached; no family adapter, no shared runner or image code.
    expect(reached).toContain(`${MODELS}/dense/spec.ts`);
    const heavy = reached.filter(
      (file) =>
        file.startsWith('adapters/runtime/') ||
        file.startsWith('adapters/tokenizers/') ||
        file.startsWith(`${MODELS}/text/`) ||
        file.startsWith(`${MODELS}/image/`) ||
        families.some((family) => file === `${MODELS}/${family}/${family}.ts`),
    );
    expect(heavy).toEqual([]);
    const packages = reached.filter((file) => /from\s+['"](sharp|onnxruntime-node|@huggingface\/tokenizers|pdfjs-dist)['"]/.test(readFileSync(join(ROOT, file), 'utf8')));
    expect(packages).toEqual([]);
  });

  it('thread machinery lives in adapters/model-threads, and models never import it', () => {
    const intoThreads: string[] = [];
    for (const [file, targets] of graph.edges) {
      if (!file.startsWith(`${MODELS}/`)) continue;
      for (const target of targets) if (target.startsWith('adapters/model-threads/')) intoThreads.push(`${file} → ${target}`);
    }
    expect(intoThreads).toEqual([]);
    for (const entry of ['model-thread.ts', 'prep-thread.ts', 'model-worker.ts', 'prep-pool.ts']) {
      expect(graph.edges.has(`adapters/model-threads/${entry}`), entry).toBe(true);
    }
    expect([...graph.edges.keys()].filter((file) => /^adapters\/models\/.*-thread\.ts$/.test(file))).toEqual([]);
  });
});
