import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { FileFingerprint, matches, quantizedCacheDir, readRecord, rememberedSha256, sha256Text, writeFingerprinted, writeRecord } from './cache-files.js';
import { makeDirectory } from '../support/directories.js';

/**
 * A copy of a self-contained ONNX graph whose weights sit in a page-aligned external-data file,
 * so onnxruntime maps them instead of copying them out of the protobuf. Creating a session from
 * a 90 MB self-contained graph spends most of its time in page faults and memmove of the weights
 * (all-MiniLM-L6-v2 on 2 cores: fp32 750-920 ms, its int8 graph 500-640 ms); from the mapped
 * copy, 235-317 ms and 143-175 ms, with the same outputs and the same steady-state speed. The
 * page cache then also shares the weights between processes loading the same model.
 *
 * The copy is made once per machine, next to the int8 graphs: `<cache>/mapped/<key>.onnx`
 * (graph without weights), `<key>.weights` and `<key>.json`, the record, written last. The key
 * hashes the source's bytes, so a changed source gets a new copy. The source is only read. Every
 * failure (unwritable cache, unreadable graph) returns the source: mapping only ever saves time.
 */

/** Changes whenever the copy would be written differently: older copies are then ignored. */
export const MAPPED_LAYOUT_VERSION = 'shoal-mapped/1';

/**
 * Graphs smaller than this are loaded as they are: for them a session's creation is dominated by
 * other work, and the copy would only cost disk space. A graph that already keeps its weights in
 * external data is small on its own, so it is never copied either.
 */
export const MAPPED_MIN_BYTES = 16 * 1024 * 1024;

export function mappedCacheDir(cacheRoot: string): string {
  return join(cacheRoot, 'mapped');
}

const MappedRecord = z.strictObject({
  format: z.literal(1),
  layout: z.literal(MAPPED_LAYOUT_VERSION),
  source: z.strictObject({ path: z.string(), bytes: z.number().int().nonnegative(), sha256: z.string().regex(/^[0-9a-f]{64}$/) }),
  graph: FileFingerprint,
  weights: FileFingerprint,
});
type MappedRecord = z.infer<typeof MappedRecord>;

export interface MappedGraphOptions {
  /** Graphs below this size are returned as they are (default MAPPED_MIN_BYTES). */
  minBytes?: number;
  /** Where a build or cache failure is reported; the source is then returned. */
  onError?: (error: unknown) => void;
}

export interface MappedGraph {
  /** The file to load: the mapped copy, or the source itself. */
  path: string;
  /** Whether `path` is a mapped copy. */
  mapped: boolean;
  /** The copy was written by this call (false: found in the cache, or not mapped). */
  built: boolean;
}

/** The file a session should load for `source`: its mapped copy (built now if needed) or the source. */
export async function mappedGraph(source: string, cacheRoot: string, options: MappedGraphOptions = {}): Promise<MappedGraph> {
  const unmapped: MappedGraph = { path: source, mapped: false, built: false };
  try {
    const info = await stat(source);
    if (info.size < (options.minBytes ?? MAPPED_MIN_BYTES)) return unmapped;
    return await getOrBuild(source, info.size, cacheRoot);
  } catch (error) {
    options.onError?.(error);
    return unmapped;
  }
}

async function getOrBuild(source: string, sourceBytes: number, cacheRoot: string): Promise<MappedGraph> {
  const dir = mappedCacheDir(cacheRoot);
  // The source hash is remembered by the file's stat (the int8 cache's memo), so a cache hit
  // costs a few stat calls instead of hashing the graph.
  const sourceSha = await rememberedSha256(source, quantizedCacheDir(cacheRoot));
  const key = sha256Text(`${MAPPED_LAYOUT_VERSION}\n${sourceSha}`);
  const recordPath = join(dir, `${key}.json`);
  const cached = await readRecord(recordPath, MappedRecord);
  if (cached !== null && cached.source.sha256 === sourceSha && (await matches(dir, cached.graph)) && (await matches(dir, cached.weights))) {
    return { path: join(dir, cached.graph.file), mapped: true, built: false };
  }

  // An unwritable cache is found before reading and decoding the source (a second or more for a
  // large graph), not after: otherwise every load would pay for a copy it cannot keep.
  await makeDirectory(dir);
  await access(dir, constants.W_OK);
  // Imported only to build: the protobuf code costs every load otherwise.
  const { readOnnx, serializeOnnx } = await import('./onnx-file.js');
  const loaded = await readOnnx(source);
  if (loaded.externalFiles.length > 0) return { path: source, mapped: false, built: false };
  const graphName = `${key}.onnx`;
  const weightsName = `${key}.weights`;
  // Limit 0: every tensor of 1 KiB or more goes to the weights file, each at a 4 KiB-aligned offset.
  const serialized = serializeOnnx(loaded.model, weightsName, 0);
  const weights = await writeFingerprinted(dir, weightsName, serialized.external ?? []);
  const graph = await writeFingerprinted(dir, graphName, [serialized.graph]);
  const record: MappedRecord = {
    format: 1,
    layout: MAPPED_LAYOUT_VERSION,
    source: { path: source, bytes: sourceBytes, sha256: sourceSha },
    graph,
    weights,
  };
  await writeRecord(recordPath, record);
  return { path: join(dir, graphName), mapped: true, built: true };
}
