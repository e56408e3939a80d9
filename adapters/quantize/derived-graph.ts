import { basename, dirname, join } from 'node:path';
import { z } from 'zod';
import { FileFingerprint, fingerprint, matches, quantizedCacheDir, readRecord, rememberedSha256, sha256Text, writeFingerprinted, writeRecord } from './cache-files.js';
import { MAPPED_MIN_BYTES } from './mapped-graph.js';
import type { ModelProto } from './onnx-file.js';

/**
 * Get-or-build of a graph derived from a model's own graph by a load-time rewrite (the reranker's
 * last-token logits, adapters/quantize/last-token-logits.ts): `<cache>/derived/<key>-<name>`,
 * where the key hashes the rewrite's version and parameters and the source's bytes, so a model is
 * rewritten once per machine. The file keeps the source's name after the key, so a shipped int8
 * graph (`model_quantized.onnx`) is still recognised as one. The source is only read; the record
 * `<key>.json`, written last, holds the fingerprints that tell a damaged copy from a good one.
 */

export function derivedCacheDir(cacheRoot: string): string {
  return join(cacheRoot, 'derived');
}

export interface GraphRewrite<Report> {
  /** Changes whenever the rewrite would produce different bytes. */
  version: string;
  /** Everything else the output depends on (part of the key). */
  params: unknown;
  apply(model: ModelProto): Report | Promise<Report>;
  /**
   * The model runs without the rewrite (a speed-up only): when the rewritten copy cannot be built
   * or written (a read-only cache), the source graph is loaded instead, with a warning.
   */
  optional?: boolean;
}

const DerivedRecord = z.strictObject({
  format: z.literal(1),
  version: z.string(),
  source: z.strictObject({ graph: FileFingerprint, external: z.array(FileFingerprint) }),
  graph: FileFingerprint,
  external: FileFingerprint.nullable(),
  report: z.unknown(),
});

export interface DerivedGraph {
  path: string;
  built: boolean;
  report: unknown;
}

/** The rewritten copy of `source` (its external data beside it), from the cache or built now. */
export async function derivedGraph<Report>(source: string, cacheRoot: string, rewrite: GraphRewrite<Report>): Promise<DerivedGraph> {
  const dir = derivedCacheDir(cacheRoot);
  const sourceDir = dirname(source);
  const sourceSha = await rememberedSha256(source, quantizedCacheDir(cacheRoot));
  const key = sha256Text(`${rewrite.version}\n${JSON.stringify(rewrite.params)}\n${sourceSha}`).slice(0, 32);
  const name = `${key}-${basename(source)}`;
  const recordPath = join(dir, `${key}.json`);
  const cached = await readRecord(recordPath, DerivedRecord);
  if (cached !== null && cached.version === rewrite.version && cached.source.graph.sha256 === sourceSha) {
    let valid = (await matches(dir, cached.graph)) && (cached.external === null || (await matches(dir, cached.external)));
    for (const print of cached.source.external) if (valid && !(await matches(sourceDir, print))) valid = false;
    if (valid) return { path: join(dir, cached.graph.file), built: false, report: cached.report };
  }
  // Imported only to build: the protobuf code costs every load otherwise.
  const { readOnnx, serializeOnnx } = await import('./onnx-file.js');
  const loaded = await readOnnx(source);
  const externalSource = await Promise.all(loaded.externalFiles.map((file) => fingerprint(sourceDir, file, true)));
  const report = await rewrite.apply(loaded.model);
  const externalName = `${name}.data`;
  // Large weights go to a page-aligned external file that onnxruntime maps (mapped-graph.ts).
  const serialized = serializeOnnx(loaded.model, externalName, MAPPED_MIN_BYTES);
  const external = serialized.external === null ? null : await writeFingerprinted(dir, externalName, serialized.external);
  const graph = await writeFingerprinted(dir, name, [serialized.graph]);
  await writeRecord(recordPath, {
    format: 1,
    version: rewrite.version,
    source: { graph: { file: basename(source), bytes: loaded.bytes, sha256: sourceSha }, external: externalSource },
    graph,
    external,
    report,
  });
  return { path: join(dir, name), built: true, report };
}
