import { createHash } from 'node:crypto';
import { open, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import type { CallOptions, Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { EncodeRequest, Role } from '../../adapters/protocol/requests.js';
import type { Taxonomy } from '../../adapters/taxonomy/index.js';
import { normalizeRow, type PackedMatrix } from './matrix.js';
import { writeFileAtomically } from '../../adapters/support/atomic-write.js';
import { makeDirectory } from '../../adapters/support/directories.js';

/**
 * The category side of classification: every category's text (its full path through a template)
 * embedded once and packed into one float32 matrix in shared memory, cached on disk under
 * `<cacheDir>/classify/` by a hash of the taxonomy, the model and the prompt/template, so later
 * runs (and other processes) load it instead of re-embedding thousands of categories.
 */

/** Bump when the file layout or the meaning of a cached matrix changes (2: keyed by the model's weights too). */
const CACHE_VERSION = 2;
/**
 * Categories per encode request, and requests in flight at once: enough to keep the engine's
 * scheduler forming full batches, small enough that a build never fills a worker's or a
 * gateway's in-flight limit (4,096 and 2,048 items) and starves the interactive calls beside it.
 */
const ENCODE_REQUEST_ITEMS = 512;
const REQUESTS_IN_FLIGHT = 2;

export interface CategoryEmbedding {
  model: string;
  /** `{path}` (full path, ' > ' separated), `{name}` (the category's own name), `{id}`. @default '{path}' */
  template: string;
  /** @default 'document' */
  role: Role;
  /** Literal prompt prepended by the engine. */
  promptText?: string | undefined;
  maxLength?: number | undefined;
}

/**
 * A store of category matrices that many processes share (the classify workers' object store,
 * pipelines/classify/category-store.ts): looked in after the local cache folder, filled after a
 * build, so a taxonomy is embedded once for all of them. Two processes that both miss build the
 * same matrix and store the same bytes: harmless.
 */
export interface SharedCategories {
  /** Where the matrix lives, for logs (`obj://…/classify/categories/<key>`). */
  where(key: string): string;
  /** The matrix's float32 bytes and its description (JSON text), null when the store has none. */
  get(key: string): Promise<{ matrix: Uint8Array; meta: string } | null>;
  put(key: string, matrix: Uint8Array, meta: string): Promise<void>;
}

/** Where matrices are kept: a local folder (`classify/` beneath it), a shared store, both or neither. */
export interface CategoryCache {
  dir: string | null;
  shared?: SharedCategories | null | undefined;
  /** Told when the shared store could not take a matrix just built (the run goes on without it). */
  onSharedError?: ((error: unknown) => void) | undefined;
}

/** Where a classifier's matrix came from. */
export type CategorySource = 'built' | 'cache' | 'store';

export interface CategoryIndex {
  /** Identifies the matrix (cache key): taxonomy + model + template + role + prompt. */
  readonly key: string;
  readonly matrix: PackedMatrix;
  /** Whether this call embedded the categories (false: loaded from the cache or memory). */
  readonly built: boolean;
  /** Embedded by this call, read from the local cache folder, or from the shared store. */
  readonly source: CategorySource;
  readonly seconds: number;
  /** The cache file, when a cache folder is in use. */
  readonly file: string | null;
}

export function categoryText(template: string, category: { id: string; path: readonly string[]; pathText: string }): string {
  return template.replaceAll('{path}', category.pathText).replaceAll('{name}', category.path.at(-1) ?? '').replaceAll('{id}', category.id);
}

/**
 * The cache key. `fingerprint` stands for the model's weights: a name says nothing of them (a
 * model replaced under the same name, or loaded at another precision, must not reuse vectors
 * made by the old one).
 */
export function categoryKey(taxonomy: Taxonomy, embedding: CategoryEmbedding, fingerprint = ''): string {
  return createHash('sha256')
    .update(JSON.stringify({ v: CACHE_VERSION, taxonomy: taxonomy.hash, model: embedding.model, fingerprint, template: embedding.template, role: embedding.role, prompt: embedding.promptText ?? null, maxLength: embedding.maxLength ?? null }))
    .digest('hex');
}

/** The bulk encode request of category texts (or the probe) for `embedding`. */
function categoryRequest(embedding: CategoryEmbedding, texts: readonly string[]): EncodeRequest {
  return {
    model: embedding.model,
    items: texts.map((text) => ({ text })),
    output_types: ['dense'],
    role: embedding.role,
    ...(embedding.promptText === undefined ? {} : { prompt_text: embedding.promptText }),
    ...(embedding.maxLength === undefined ? {} : { max_length: embedding.maxLength }),
    priority: 'bulk',
  };
}

function noDenseVectors(model: string): ShoalError {
  return new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `model ${model} gives no dense vectors: classification needs a dense embedding model`);
}

/** A fixed text whose vector identifies the model's weights (and precision) for the cache key. */
const PROBE_TEXT = 'Shoal category cache probe: a red ceramic teapot, 1.2 litres.';
/** Decimals of the probe vector kept: the same model on the same machine gives it exactly; another model, far off. */
const PROBE_DECIMALS = 3;

/** The model's fingerprint: a hash of its rounded vector for PROBE_TEXT (one single-item call). */
async function modelFingerprint(engine: Engine, embedding: CategoryEmbedding, call: CallOptions): Promise<string> {
  const result = await engine.encode(categoryRequest(embedding, [PROBE_TEXT]), call);
  const vector = result.items[0]?.dense;
  if (vector === undefined) throw noDenseVectors(embedding.model);
  // -0 and 0 round alike.
  const rounded = Array.from(vector, (value) => Math.round(value * 10 ** PROBE_DECIMALS) || 0);
  return createHash('sha256').update(rounded.join(',')).digest('hex').slice(0, 16);
}

function sharedMatrix(rows: number, dim: number): Float32Array {
  return new Float32Array(new SharedArrayBuffer(rows * dim * Float32Array.BYTES_PER_ELEMENT));
}

/** Told how many categories are embedded so far (0 before the first request), for a progress bar. */
export type CategoryProgress = (embedded: number, total: number) => void;

async function embed(engine: Engine, taxonomy: Taxonomy, embedding: CategoryEmbedding, call: CallOptions, progress?: CategoryProgress): Promise<PackedMatrix> {
  const texts = taxonomy.categories.map((category) => categoryText(embedding.template, category));
  if (texts.length === 0) throw new ShoalError(ErrorCode.INVALID_INPUT, 'taxonomy has no categories');
  let data: Float32Array | null = null;
  let dim = 0;
  let embedded = 0;
  progress?.(0, texts.length);
  const embedSlice = async (at: number): Promise<void> => {
    const slice = texts.slice(at, at + ENCODE_REQUEST_ITEMS);
    const result = await engine.encode(categoryRequest(embedding, slice), call);
    const seen = new Uint8Array(slice.length);
    for (const item of result.items) {
      const vector = item.dense;
      if (vector === undefined) throw noDenseVectors(embedding.model);
      if (data === null) {
        dim = vector.length;
        data = sharedMatrix(texts.length, dim);
      }
      if (vector.length !== dim) throw new ShoalError(ErrorCode.INFERENCE_FAILED, `model ${embedding.model} returned vectors of ${vector.length} and ${dim} dimensions`);
      const row = at + item.index;
      data.set(vector, row * dim);
      normalizeRow(data, row * dim, dim);
      seen[item.index] = 1;
    }
    if (seen.includes(0)) throw new ShoalError(ErrorCode.INFERENCE_FAILED, `model ${embedding.model} returned fewer vectors than categories`);
    embedded += slice.length;
    progress?.(embedded, texts.length);
  };
  // A few requests in flight, each taking the next slice when it is done.
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < texts.length) {
      const at = next;
      next += ENCODE_REQUEST_ITEMS;
      await embedSlice(at);
    }
  };
  await Promise.all(Array.from({ length: Math.min(REQUESTS_IN_FLIGHT, Math.ceil(texts.length / ENCODE_REQUEST_ITEMS)) }, lane));
  if (data === null) throw new ShoalError(ErrorCode.INTERNAL, 'no category was embedded');
  return { rows: texts.length, dim, data };
}

const CacheMeta = z.strictObject({
  v: z.literal(CACHE_VERSION),
  rows: z.number().int().positive(),
  dim: z.number().int().positive().max(65_536),
  model: z.string().max(1024),
  taxonomy: z.string().max(128),
});
type CacheMeta = z.infer<typeof CacheMeta>;

/** A matrix from the shared store, checked against its description and the taxonomy's size. */
function fromShared(found: { matrix: Uint8Array; meta: string }, rows: number): { matrix: PackedMatrix; meta: CacheMeta } | null {
  let meta: CacheMeta;
  try {
    const parsed = CacheMeta.safeParse(JSON.parse(found.meta));
    if (!parsed.success || parsed.data.rows !== rows) return null;
    meta = parsed.data;
  } catch {
    return null; // Not a description Shoal wrote: built again below.
  }
  if (found.matrix.byteLength !== meta.rows * meta.dim * Float32Array.BYTES_PER_ELEMENT) return null;
  const data = sharedMatrix(meta.rows, meta.dim);
  new Uint8Array(data.buffer).set(found.matrix);
  return { matrix: { rows: meta.rows, dim: meta.dim, data }, meta };
}

function matrixBytes(matrix: PackedMatrix): Uint8Array {
  return new Uint8Array(matrix.data.buffer, matrix.data.byteOffset, matrix.data.byteLength);
}

async function readCached(file: string, rows: number): Promise<PackedMatrix | null> {
  let meta: CacheMeta;
  try {
    const parsed = CacheMeta.safeParse(JSON.parse(await readFile(`${file}.json`, 'utf8')));
    if (!parsed.success || parsed.data.rows !== rows) return null;
    meta = parsed.data;
  } catch {
    return null; // No cache yet (or an unreadable one, rebuilt below).
  }
  const data = sharedMatrix(meta.rows, meta.dim);
  const bytes = new Uint8Array(data.buffer);
  let handle;
  try {
    handle = await open(`${file}.f32`, 'r');
  } catch {
    return null;
  }
  try {
    const { size } = await handle.stat();
    if (size !== bytes.byteLength) return null;
    let offset = 0;
    while (offset < bytes.byteLength) {
      const { bytesRead } = await handle.read(bytes, offset, bytes.byteLength - offset, offset);
      if (bytesRead === 0) return null;
      offset += bytesRead;
    }
  } finally {
    await handle.close();
  }
  return { rows: meta.rows, dim: meta.dim, data };
}

/** Writes the matrix, then its metadata, each through a temporary file: a reader never sees half a cache. */
async function writeCached(file: string, matrix: PackedMatrix, meta: CacheMeta): Promise<void> {
  await writeFileAtomically(`${file}.f32`, matrixBytes(matrix));
  await writeFileAtomically(`${file}.json`, `${JSON.stringify(meta)}\n`);
}

async function keepLocally(file: string, cacheDir: string | null, matrix: PackedMatrix, meta: CacheMeta): Promise<void> {
  try {
    await makeDirectory(join(file, '..'));
    await writeCached(file, matrix, meta);
  } catch (error) {
    await rm(`${file}.json`, { force: true });
    throw new ShoalError(ErrorCode.INTERNAL, `cannot write the category cache under ${cacheDir ?? ''}: ${String(error)}`, { cause: error });
  }
}

/**
 * The category matrix of `taxonomy` for `embedding`: from the local cache folder when it holds
 * one, else from the shared store (and kept in the folder), else embedded through `engine` (and
 * written to both). A string `cache` is the folder alone; null keeps the matrix in memory only.
 */
export async function categoryIndex(engine: Engine, taxonomy: Taxonomy, embedding: CategoryEmbedding, cache: string | null | CategoryCache, call: CallOptions = {}, progress?: CategoryProgress): Promise<CategoryIndex> {
  const started = performance.now();
  const { dir: cacheDir, shared = null, onSharedError } = cache === null || typeof cache === 'string' ? { dir: cache, shared: null, onSharedError: undefined } : cache;
  // Only a cache outside this call outlives the model it was made with; in memory the name is enough.
  const fingerprint = cacheDir === null && shared === null ? '' : await modelFingerprint(engine, embedding, call);
  const key = categoryKey(taxonomy, embedding, fingerprint);
  const file = cacheDir === null ? null : join(cacheDir, 'classify', key);
  const seconds = (): number => (performance.now() - started) / 1000;
  if (file !== null) {
    const cached = await readCached(file, taxonomy.categories.length);
    if (cached !== null) return { key, matrix: cached, built: false, source: 'cache', seconds: seconds(), file };
  }
  if (shared !== null) {
    const found = await shared.get(key);
    const stored = found === null ? null : fromShared(found, taxonomy.categories.length);
    if (stored !== null) {
      if (file !== null) await keepLocally(file, cacheDir, stored.matrix, stored.meta);
      return { key, matrix: stored.matrix, built: false, source: 'store', seconds: seconds(), file };
    }
  }
  const matrix = await embed(engine, taxonomy, embedding, call, progress);
  const meta: CacheMeta = { v: CACHE_VERSION, rows: matrix.rows, dim: matrix.dim, model: embedding.model, taxonomy: taxonomy.hash };
  if (file !== null) await keepLocally(file, cacheDir, matrix, meta);
  if (shared !== null) {
    // The matrix is built and in use: a store that cannot take it costs the next process a build, not this run.
    await shared.put(key, matrixBytes(matrix), `${JSON.stringify(meta)}\n`).catch((error: unknown) => onSharedError?.(error));
  }
  return { key, matrix, built: true, source: 'built', seconds: seconds(), file };
}
