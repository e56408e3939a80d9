import { createHash } from 'node:crypto';
import { z } from 'zod';
import { S3Store, joinKey, parseS3Uri, type S3Location, type S3SettingsInput } from '../../object-store/index.js';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { filterPredicate, parseFilter } from '../shared/filter-tree.js';
import type { ChunkRow, DocumentState, MultivectorSearchOptions, SearchHit, SearchOptions, Store, SparseValues, TableSpec, QueryVector } from '../store.js';
import { noMultivector, refuseMultivector } from '../shared/multivector.js';
import { checkSparseQuery, rankSparse } from '../shared/sparse.js';
import { checkQuery, checkRowTypes, checkTableName, existsMatching, freezeSpec, HitShape, keptOptional, rankTyped, StateShape, StoredSpec, storedSpecOf } from '../shared/table-spec.js';

/**
 * `s3://bucket/prefix`: an index kept as plain objects, for corpora that live in object storage
 * and readers that want files, not a database. Under `prefix/<table>/`:
 * - `spec.json`: the table spec (dimension, distance, optional columns, metadata);
 * - `rows/<sha256(source)>.jsonl`: the rows of one source, one JSON object per line;
 * - `documents/<sha256(source)>.json`: the state of that source.
 * Every object is written whole (atomic put or multipart upload), so a reader sees a source's old
 * rows or its new ones. Upserts are by row id: a commit rewrites each source's object with its
 * current rows (stale content or settings dropped). Count and search scan every row object
 * (brute force, exact, scored as LanceDB scores), with row objects cached by ETag between calls.
 * Filters: the whole `--filter` subset (comparisons, AND/OR/NOT, IN, IS NULL, LIKE, BETWEEN),
 * evaluated in process. One writer per table at a time (as for LanceDB's folder).
 */

/** Largest object of a sink read back (a source's rows: a large PDF at 384 dims stays far below). */
const MAX_OBJECT_BYTES = 1024 * 1024 * 1024;
/** Sources read or written at once. */
const CONCURRENCY = 16;

const Sparse = z.strictObject({ indices: z.array(z.number()), values: z.array(z.number()), dimension: z.number() });
/** The vector parts of a stored row; the metadata columns are read through toHitRow. */
const StoredVectors = z.object({ vector: z.array(z.number()).max(65_536), sparse: Sparse.nullable().optional() });
type StoredRow = Omit<ChunkRow, 'vector'> & { vector: number[] };

export interface S3JsonStoreOptions {
  /** `s3://bucket/prefix` of the index (the table is a folder under it). */
  uri: string;
  /** @default 'chunks' */
  table?: string;
  /** The store to use (shared; not closed by close()). */
  store?: S3Store;
  /** Settings to build a store from when none is given. @default the SDK's defaults */
  s3?: S3SettingsInput;
}

async function inPool<T, R>(items: readonly T[], work: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const runner = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++;
      out[index] = await work(items[index] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, items.length) }, runner));
  return out;
}

function sourceName(source: string): string {
  return createHash('sha256').update(source).digest('hex');
}

function jsonOf(data: Buffer, where: string): unknown {
  try {
    return JSON.parse(data.toString('utf8'));
  } catch (error) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `${where} is not JSON`, { cause: error });
  }
}

function parseLines(text: string, where: string): StoredRow[] {
  const rows: StoredRow[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (error) {
      throw new ShoalError(ErrorCode.CONFIG_INVALID, `${where} holds a line that is not JSON`, { cause: error });
    }
    const vectors = StoredVectors.safeParse(value);
    const hit = HitShape.safeParse(value);
    if (!vectors.success || !hit.success) throw new ShoalError(ErrorCode.CONFIG_INVALID, `${where} holds a row Shoal did not write`);
    rows.push({ ...hit.data, vector: vectors.data.vector, ...(vectors.data.sparse === undefined ? {} : { sparse: vectors.data.sparse }) });
  }
  return rows;
}

export class S3JsonStore implements Store {
  readonly #store: S3Store;
  readonly #ownsStore: boolean;
  readonly #bucket: string;
  readonly #base: string;
  readonly #where: string;
  #spec: TableSpec | null = null;
  /** Row objects read before, by key: reused while their ETag is unchanged. */
  readonly #cache = new Map<string, { etag: string; rows: StoredRow[] }>();

  constructor(options: S3JsonStoreOptions) {
    const location = parseS3Uri(options.uri);
    const table = checkTableName(options.table ?? 'chunks');
    this.#store = options.store ?? new S3Store(options.s3 ?? {});
    this.#ownsStore = options.store === undefined;
    // No allow-list check: the index is the operator's own configuration (SHOAL_S3_BUCKETS bounds what jobs may name).
    this.#bucket = location.bucket;
    this.#base = joinKey(location.key, table);
    this.#where = `table ${table} in s3://${location.bucket}/${location.key}`;
  }

  #at(relative: string): S3Location {
    return { bucket: this.#bucket, key: joinKey(this.#base, relative) };
  }

  async describe(): Promise<TableSpec | null> {
    if (this.#spec !== null) return this.#spec;
    const data = await this.#store.readIfExists(this.#at('spec.json'), 1024 * 1024);
    if (data === null) return null;
    const parsed = StoredSpec.safeParse(jsonOf(data, `${this.#where}: spec.json`));
    if (!parsed.success) throw new ShoalError(ErrorCode.CONFIG_INVALID, `${this.#where} was not written by shoal ingest (spec.json)`);
    this.#spec = freezeSpec(parsed.data);
    return this.#spec;
  }

  async prepare(spec: TableSpec): Promise<void> {
    refuseMultivector(spec, 'S3', this.#where);
    if (await existsMatching(() => this.describe(), spec, this.#where)) return;
    const stored = storedSpecOf(spec);
    await this.#store.write(this.#at('spec.json'), Buffer.from(JSON.stringify(stored)), { contentType: 'application/json' });
    this.#spec = freezeSpec(spec);
  }

  async states(sources: readonly string[]): Promise<Map<string, DocumentState>> {
    const out = new Map<string, DocumentState>();
    const found = await inPool(sources, async (source) => {
      const location = this.#at(`documents/${sourceName(source)}.json`);
      const data = await this.#store.readIfExists(location, 1024 * 1024);
      if (data === null) return null;
      const state = StateShape.safeParse(jsonOf(data, `s3://${location.bucket}/${location.key}`));
      if (!state.success) throw new ShoalError(ErrorCode.CONFIG_INVALID, `s3://${location.bucket}/${location.key} is not a document state Shoal wrote`);
      return state.data;
    });
    for (const state of found) if (state !== null) out.set(state.source, state);
    return out;
  }

  async #rowsOf(source: string): Promise<StoredRow[]> {
    const location = this.#at(`rows/${sourceName(source)}.jsonl`);
    const data = await this.#store.readIfExists(location, MAX_OBJECT_BYTES);
    return data === null ? [] : parseLines(data.toString('utf8'), `s3://${location.bucket}/${location.key}`);
  }

  async commit(rows: readonly ChunkRow[], states: readonly DocumentState[]): Promise<void> {
    if (states.length === 0 && rows.length === 0) return;
    const spec = await this.describe();
    if (spec === null && rows.length > 0) throw new ShoalError(ErrorCode.INTERNAL, `${this.#where} must be prepared before rows are written`);
    checkRowTypes(rows, spec);
    const optional = spec?.optionalColumns ?? [];
    const bySource = new Map<string, ChunkRow[]>();
    for (const row of rows) bySource.set(row.source, [...(bySource.get(row.source) ?? []), row]);
    const stateOf = new Map(states.map((state) => [state.source, state]));
    const sources = [...new Set([...bySource.keys(), ...stateOf.keys()])];
    // Rows first, then states: an interrupt in between leaves rows without a state, and the re-run rewrites the same ids.
    await inPool(sources, async (source) => {
      const state = stateOf.get(source);
      const current = new Map<string, StoredRow>();
      for (const row of await this.#rowsOf(source)) {
        if (state === undefined || (row.document_id === state.document_id && row.settings === state.settings)) current.set(row.id, row);
      }
      for (const row of bySource.get(source) ?? []) {
        current.set(row.id, { ...row, ...keptOptional(row, optional), vector: Array.from(row.vector) });
      }
      const location = this.#at(`rows/${sourceName(source)}.jsonl`);
      if (current.size === 0) {
        await this.#store.delete(location);
        return;
      }
      const ordered = [...current.values()].sort((a, b) => a.page - b.page || a.chunk - b.chunk || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      await this.#store.write(location, Buffer.from(ordered.map((row) => JSON.stringify(row)).join('\n') + '\n'), { contentType: 'application/x-ndjson' });
    });
    await inPool(states, (state) => this.#store.write(this.#at(`documents/${sourceName(state.source)}.json`), Buffer.from(JSON.stringify(state)), { contentType: 'application/json' }));
  }

  async statesUnder(prefix: string): Promise<DocumentState[]> {
    // State objects are named by a hash of their source: each one is read to learn its source.
    const keys: string[] = [];
    for await (const object of this.#store.listFolder(this.#at('documents'))) if (object.key.endsWith('.json')) keys.push(object.key);
    const found = await inPool(keys, async (key) => {
      const data = await this.#store.readIfExists({ bucket: this.#bucket, key }, 1024 * 1024);
      if (data === null) return null;
      const state = StateShape.safeParse(jsonOf(data, `s3://${this.#bucket}/${key}`));
      if (!state.success) throw new ShoalError(ErrorCode.CONFIG_INVALID, `s3://${this.#bucket}/${key} is not a document state Shoal wrote`);
      return state.data;
    });
    return found.filter((state): state is DocumentState => state !== null && state.source.startsWith(prefix));
  }

  async remove(sources: readonly string[]): Promise<void> {
    // Rows before states: an interrupt in between leaves a state that the next prune finds again.
    await inPool(sources, async (source) => {
      await this.#store.delete(this.#at(`rows/${sourceName(source)}.jsonl`));
      await this.#store.delete(this.#at(`documents/${sourceName(source)}.json`));
    });
  }

  /** Every stored row; row objects unchanged since the last call come from the cache. */
  async #allRows(): Promise<StoredRow[]> {
    const listed: { key: string; etag: string }[] = [];
    for await (const object of this.#store.listFolder(this.#at('rows'))) {
      if (object.key.endsWith('.jsonl')) listed.push({ key: object.key, etag: object.etag ?? '' });
    }
    const keys = new Set(listed.map((object) => object.key));
    for (const key of this.#cache.keys()) if (!keys.has(key)) this.#cache.delete(key);
    const groups = await inPool(listed, async (object) => {
      const cached = this.#cache.get(object.key);
      if (cached !== undefined && cached.etag !== '' && cached.etag === object.etag) return cached.rows;
      const data = await this.#store.readIfExists({ bucket: this.#bucket, key: object.key }, MAX_OBJECT_BYTES);
      const rows = data === null ? [] : parseLines(data.toString('utf8'), `s3://${this.#bucket}/${object.key}`);
      this.#cache.set(object.key, { etag: object.etag, rows });
      return rows;
    });
    return groups.flat();
  }

  async count(filter?: string): Promise<number> {
    const matches = filter === undefined ? null : filterPredicate(parseFilter(filter));
    const rows = await this.#allRows();
    return matches === null ? rows.length : rows.filter(matches).length;
  }

  async search(query: QueryVector, options: SearchOptions): Promise<SearchHit[]> {
    // The numbers this backend's client and scoring take: the store is the query vector's wire edge.
    const vector: readonly number[] = Array.isArray(query) ? query : Array.from(query);
    const spec = await this.describe();
    if (spec === null) throw new ShoalError(ErrorCode.NOT_FOUND, `no ${this.#where} (run shoal ingest first)`);
    checkQuery(vector, spec, options.k);
    const matches = options.filter === undefined ? null : filterPredicate(parseFilter(options.filter));
    const candidates: { row: SearchHit['row']; vector: readonly number[] }[] = [];
    for (const row of await this.#allRows()) {
      if (matches !== null && !matches(row)) continue;
      const { vector: stored, sparse: _sparse, ...rest } = row;
      candidates.push({ row: rest, vector: stored });
    }
    return rankTyped(spec, vector, candidates, options.k);
  }

  async searchMultivector(_query: readonly (readonly number[])[], _options: MultivectorSearchOptions): Promise<SearchHit[]> {
    throw noMultivector('S3', this.#where);
  }

  /** An exact scan over the rows' stored sparse vectors (the same row cache as search). */
  async searchSparse(query: SparseValues, options: SearchOptions): Promise<SearchHit[]> {
    if ((await this.describe()) === null) throw new ShoalError(ErrorCode.NOT_FOUND, `no ${this.#where} (run shoal ingest first)`);
    checkSparseQuery(query, options.k);
    const matches = options.filter === undefined ? null : filterPredicate(parseFilter(options.filter));
    const candidates: { row: SearchHit['row']; sparse: SparseValues | null | undefined }[] = [];
    for (const row of await this.#allRows()) {
      if (matches !== null && !matches(row)) continue;
      const { vector: _vector, sparse, ...rest } = row;
      candidates.push({ row: rest, sparse });
    }
    return rankSparse(query, candidates, options.k);
  }

  /** Nothing to build: search is an exact scan. */
  async optimize(): Promise<void> {}

  async close(): Promise<void> {
    this.#cache.clear();
    if (this.#ownsStore) this.#store.close();
  }
}

/** `s3://bucket/prefix[?table=T]`; the `table` option is the fallback when the URI names none (as in open.ts). */
export async function openS3Sink(uri: string, options: Omit<S3JsonStoreOptions, 'uri'> = {}): Promise<S3JsonStore> {
  const query = uri.indexOf('?');
  const base = query === -1 ? uri : uri.slice(0, query);
  const named = query === -1 ? null : new URLSearchParams(uri.slice(query + 1)).get('table');
  const table = named ?? options.table;
  return new S3JsonStore({ ...options, uri: base, ...(table === undefined ? {} : { table }) });
}
