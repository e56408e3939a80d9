import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';

/**
 * The encoded SciFact chunks the search benches build their rows around (bench/search.ts encodes
 * them and, with `--cache DIR`, keeps them; bench/lance-index-threshold.ts reads them back):
 * `scifact-<real>-<chunkTokens>.json` (the chunks) beside `.f32` (their vectors, row after row).
 */

const RealChunks = z.array(z.object({ id: z.string(), documentId: z.string(), chunk: z.number(), text: z.string(), start: z.number(), end: z.number() }));
export type RealChunk = z.infer<typeof RealChunks>[number];

function cachePath(dir: string, real: number, chunkTokens: number): string {
  return join(dir, `scifact-${real}-${chunkTokens}`);
}

/** The cached chunks and vectors; null when the folder holds none for these settings. */
export function readRealChunks(dir: string, real: number, chunkTokens: number): { chunks: RealChunk[]; vectors: Float32Array; dim: number } | null {
  const base = cachePath(dir, real, chunkTokens);
  if (!existsSync(`${base}.f32`)) return null;
  const chunks = RealChunks.parse(JSON.parse(readFileSync(`${base}.json`, 'utf8')));
  const bytes = readFileSync(`${base}.f32`);
  const vectors = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4).slice();
  return { chunks, vectors, dim: vectors.length / chunks.length };
}

export function writeRealChunks(dir: string, real: number, chunkTokens: number, chunks: readonly RealChunk[], vectors: Float32Array): void {
  mkdirSync(dir, { recursive: true });
  const base = cachePath(dir, real, chunkTokens);
  writeFileSync(`${base}.json`, JSON.stringify(chunks));
  writeFileSync(`${base}.f32`, vectors);
}
