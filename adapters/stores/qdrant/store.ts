import { createHash } from 'node:crypto';
import { QdrantClient } from '@qdrant/js-client-rest';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { toQdrantFilter, type QdrantFilter } from './filter.js';
import { parseFilter } from '../shared/filter-tree.js';
import type { ChunkRow, Distance, DocumentState, SearchHit, SearchOptions, Store, SparseValues, TableSpec, MultivectorSearchOptions, QueryVector } from '../store.js';
import { checkSparseQuery, rankSparse } from '../shared/sparse.js';
import { checkMultivectorQuery, multivectorDimension } from '../shared/multivector.js';
import { bitLength, fromFlatVector, isBinaryType, toFlatVector } from '../shared/vector-types.js';
import { byScore, candidateCount, checkQuery, checkRowTypes, checkSpec, checkTableName, existsMatching, freezeSpec, keptOptional, rankTyped, StoredSpec, storedSpecOf, toHitRow, toState, vectorTypeOf } from '../shared/table-spec.js';

/**
 * Qdrant (`qdrant://host:port/COLLECTION`) through @qdrant/js-client-rest. Point ids must be
 * unsigned integers or UUIDs, so each row's id becomes a name-based UUID (SHA-1, version 5
 * layout) and our id stays in the payload. The collection has a named dense vector `dense` (size,
 * distance and datatype from the spec and its output type, denseParams) and a sparse vector `sparse`. States and the spec live in
 * `COLLECTION__documents` (points with a one-number placeholder vector). Rows are upserted with
 * `wait: true` before the states, so a retry after a failure rewrites the same points.
 */

export interface QdrantStoreOptions {
  host: string;
  port: number;
  https?: boolean;
  apiKey?: string | undefined;
  /** @default 'chunks' */
  collection?: string;
  /** Points per upsert. @default 500 */
  batchRows?: number;
  /** Longest wait for one request's answer (the client aborts it then: a TIMEOUT, retried). @default 60_000 */
  requestTimeoutMs?: number;
}

const QDRANT_DISTANCE: Readonly<Record<Distance, 'Cosine' | 'Euclid' | 'Dot'>> = { cosine: 'Cosine', l2: 'Euclid', dot: 'Dot' };
const PAGE = 1_000;
const SPEC_KEY = 'shoal:spec';

/** A name-based UUID (RFC 4122 version 5 layout over SHA-1): the same id always gives the same point. */
export function pointId(id: string): string {
  const hash = createHash('sha1').update('shoal:').update(id).digest();
  hash[6] = ((hash[6] ?? 0) & 0x0f) | 0x50;
  hash[8] = ((hash[8] ?? 0) & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Beam width of a search (Qdrant's default is the index's ef_construct, 100). */
const SEARCH_EF = 200;

/**
 * The named dense vector of a point returned `with_vector: ['dense']`. Qdrant keeps Cosine
 * vectors normalised, which leaves their cosine unchanged.
 */
const DenseOf = z.object({ dense: z.array(z.number()) }).transform((vectors) => vectors.dense);
/** The named sparse vector of a returned point (absent when the point has none). */
const SparseOf = z
  .object({ sparse: z.object({ indices: z.array(z.number()), values: z.array(z.number()) }).optional() })
  .transform((vectors) => vectors.sparse ?? null);

export function classify(error: unknown, what: string): ShoalError {
  if (error instanceof ShoalError) return error;
  const message = error instanceof Error ? error.message : String(error);
  const status = typeof error === 'object' && error !== null && 'status' in error ? Number(error.status) : 0;
  // The client aborts a request that outlives its timeout ("This operation was aborted"): a hung
  // or overloaded server, to be retried like one that refuses connections, never INTERNAL.
  const name = error instanceof Error ? error.name : '';
  if (name === 'QdrantClientTimeoutError' || name === 'AbortError' || name === 'TimeoutError') return new ShoalError(ErrorCode.TIMEOUT, `qdrant ${what}: no answer within the request timeout (${message})`, { cause: error });
  const transient = status === 429 || status >= 500 || /fetch failed|ECONNREFUSED|ECONNRESET|socket hang up|timeout/i.test(message);
  return new ShoalError(transient ? ErrorCode.UNAVAILABLE : ErrorCode.INTERNAL, `qdrant ${what}: ${message}`, { cause: error });
}

const CollectionInfo = z.object({
  config: z.object({ params: z.object({ vectors: z.record(z.string(), z.object({ size: z.number(), distance: z.string(), datatype: z.string().nullish() })).optional() }) }),
});

/** The named multivector of a table with token vectors: Qdrant's MaxSim (`comparator: max_sim`) over Cosine. */
function multivectorParams(spec: TableSpec, where: string): Record<string, { size: number; distance: 'Cosine'; multivector_config: { comparator: 'max_sim' } }> {
  if (!spec.optionalColumns.includes('multivector')) return {};
  return { multivector: { size: multivectorDimension(spec, where), distance: 'Cosine', multivector_config: { comparator: 'max_sim' } } };
}

interface DenseParams {
  size: number;
  distance: 'Cosine' | 'Euclid' | 'Dot';
  datatype?: 'float16' | 'uint8';
}

/**
 * The `dense` vector's parameters for a table's output type. Qdrant stores `float16` and `uint8`
 * natively (`datatype`); int8 codes are kept as float32 (exact; Qdrant has no signed 8-bit type).
 * Binary vectors are stored unpacked, one 0/1 `uint8` per dimension, under Euclid distance: the
 * squared distance of two such vectors is their Hamming distance, so Qdrant's own ranking is the
 * Hamming ranking (Qdrant has no packed-bit vector type).
 */
function denseParams(spec: TableSpec): DenseParams {
  const type = spec.vectorType ?? 'float32';
  if (isBinaryType(type)) return { size: bitLength(spec.dimension), distance: 'Euclid', datatype: 'uint8' };
  const params: DenseParams = { size: spec.dimension, distance: QDRANT_DISTANCE[spec.distance] };
  if (type === 'float16' || type === 'uint8') params.datatype = type;
  return params;
}


export class QdrantStore implements Store {
  readonly #client: QdrantClient;
  readonly #name: string;
  readonly #documents: string;
  readonly #where: string;
  readonly #batchRows: number;
  #spec: TableSpec | null = null;
  #documentsReady = false;

  constructor(options: QdrantStoreOptions) {
    this.#name = checkTableName(options.collection ?? 'chunks');
    this.#documents = `${this.#name}__documents`;
    this.#batchRows = options.batchRows ?? 500;
    this.#where = `collection ${this.#name} on qdrant://${options.host}:${options.port}`;
    this.#client = new QdrantClient({
      host: options.host,
      port: options.port,
      https: options.https ?? false,
      ...(options.apiKey === undefined ? {} : { apiKey: options.apiKey }),
      checkCompatibility: false,
      timeout: options.requestTimeoutMs ?? 60_000,
    });
  }

  async #call<T>(what: string, body: () => Promise<T>): Promise<T> {
    try {
      return await body();
    } catch (error) {
      throw classify(error, what);
    }
  }

  async #exists(name: string): Promise<boolean> {
    return (await this.#call('lookup', () => this.#client.collectionExists(name))).exists;
  }

  async #ensureDocuments(): Promise<void> {
    if (this.#documentsReady) return;
    if (!(await this.#exists(this.#documents))) {
      await this.#call('create state collection', () => this.#client.createCollection(this.#documents, { vectors: { size: 1, distance: 'Dot' } }));
    }
    this.#documentsReady = true;
  }

  async describe(): Promise<TableSpec | null> {
    if (this.#spec !== null) return this.#spec;
    if (!(await this.#exists(this.#name)) || !(await this.#exists(this.#documents))) return null;
    const [point] = await this.#call('describe', () => this.#client.retrieve(this.#documents, { ids: [pointId(SPEC_KEY)], with_payload: true }));
    const stored = StoredSpec.safeParse(JSON.parse(String(point?.payload?.spec ?? 'null')));
    if (!stored.success) throw new ShoalError(ErrorCode.CONFIG_INVALID, `${this.#where} was not written by shoal ingest`);
    // The collection's own vector config is the truth; a spec that disagrees with it is refused.
    const info = CollectionInfo.safeParse(await this.#call('describe', () => this.#client.getCollection(this.#name)));
    const dense = info.success ? info.data.config.params.vectors?.dense : undefined;
    if (dense === undefined) throw new ShoalError(ErrorCode.CONFIG_INVALID, `${this.#where} has no 'dense' vector: it was not created by shoal ingest`);
    const distance = (Object.entries(QDRANT_DISTANCE).find(([, name]) => name === dense.distance)?.[0] ?? dense.distance) as Distance;
    const expected = denseParams(stored.data);
    if (isBinaryType(stored.data.vectorType)) {
      // The collection holds the bits: its size and distance are those of the unpacked form.
      if (dense.size !== expected.size || dense.distance !== expected.distance) {
        throw new ShoalError(ErrorCode.CONFIG_INVALID, `${this.#where} records ${stored.data.vectorType} vectors but its 'dense' vector is ${dense.size} ${dense.distance}`);
      }
      this.#spec = freezeSpec(stored.data);
      return this.#spec;
    }
    if (dense.datatype != null && dense.datatype !== (expected.datatype ?? 'float32')) {
      throw new ShoalError(ErrorCode.CONFIG_INVALID, `${this.#where} records ${stored.data.vectorType} vectors but its 'dense' vector is ${dense.datatype}`);
    }
    this.#spec = freezeSpec({ ...stored.data, dimension: dense.size, distance });
    return this.#spec;
  }

  async prepare(spec: TableSpec): Promise<void> {
    if (await existsMatching(() => this.describe(), spec, this.#where)) return;
    const stored = storedSpecOf(spec);
    await this.#ensureDocuments();
    if (!(await this.#exists(this.#name))) {
      await this.#call('create collection', () =>
        this.#client.createCollection(this.#name, { vectors: { dense: denseParams(spec), ...multivectorParams(spec, this.#where) }, sparse_vectors: { sparse: {} } }),
      );
      await this.#call('create index', () => this.#client.createPayloadIndex(this.#name, { field_name: 'source', field_schema: 'keyword', wait: true }));
    }
    await this.#call('store spec', () =>
      this.#client.upsert(this.#documents, { wait: true, points: [{ id: pointId(SPEC_KEY), vector: [0], payload: { spec: JSON.stringify(stored) } }] }),
    );
    this.#spec = null;
    const created = await this.describe();
    if (created !== null) checkSpec(created, spec, this.#where);
  }

  async states(sources: readonly string[]): Promise<Map<string, DocumentState>> {
    const out = new Map<string, DocumentState>();
    if (sources.length === 0 || !(await this.#exists(this.#documents))) return out;
    for (let at = 0; at < sources.length; at += PAGE) {
      const ids = sources.slice(at, at + PAGE).map((source) => pointId(`state:${source}`));
      const points = await this.#call('states', () => this.#client.retrieve(this.#documents, { ids, with_payload: true }));
      for (const point of points) {
        const state = toState(point.payload);
        out.set(state.source, state);
      }
    }
    return out;
  }

  async commit(rows: readonly ChunkRow[], states: readonly DocumentState[]): Promise<void> {
    if (states.length === 0) return;
    const spec = rows.length > 0 ? await this.describe() : null;
    if (rows.length > 0 && spec === null) throw new ShoalError(ErrorCode.INTERNAL, `${this.#where} must be prepared before rows are written`);
    checkRowTypes(rows, spec);
    const optional = spec?.optionalColumns ?? [];
    for (let at = 0; at < rows.length; at += this.#batchRows) {
      const points = rows.slice(at, at + this.#batchRows).map((row) => {
        const { vector, sparse, multivector, ...payload } = row;
        const tokens = multivector == null || !optional.includes('multivector') ? {} : { multivector: multivector.map((token) => [...token]) };
        return {
          id: pointId(row.id),
          vector: { dense: toFlatVector(vector, vectorTypeOf(spec ?? {})), ...(sparse == null ? {} : { sparse: { indices: [...sparse.indices], values: [...sparse.values] } }), ...tokens },
          payload: { ...payload, ...keptOptional(row, optional) },
        };
      });
      await this.#call('upsert', () => this.#client.upsert(this.#name, { wait: true, points }));
    }
    if (spec !== null || (await this.#exists(this.#name))) await this.#deleteStale(states);
    await this.#ensureDocuments();
    for (let at = 0; at < states.length; at += this.#batchRows) {
      const points = states.slice(at, at + this.#batchRows).map((state) => ({ id: pointId(`state:${state.source}`), vector: [0], payload: { ...state } }));
      await this.#call('states', () => this.#client.upsert(this.#documents, { wait: true, points }));
    }
  }

  /** Per source: its points with another document id or settings (older versions). */
  async #deleteStale(states: readonly DocumentState[]): Promise<void> {
    for (let at = 0; at < states.length; at += 100) {
      const should = states.slice(at, at + 100).map((state) => ({
        must: [{ key: 'source', match: { value: state.source } }],
        should: [
          { must_not: [{ key: 'document_id', match: { value: state.document_id } }] },
          { must_not: [{ key: 'settings', match: { value: state.settings } }] },
        ],
      }));
      await this.#call('delete stale rows', () => this.#client.delete(this.#name, { wait: true, filter: { should } }));
    }
  }

  async statesUnder(prefix: string): Promise<DocumentState[]> {
    if (!(await this.#exists(this.#documents))) return [];
    const out: DocumentState[] = [];
    // Qdrant's keyword match has no prefix form: the state points (one per source) are scrolled.
    let offset: string | number | undefined;
    do {
      const from = offset;
      const page = await this.#call('states', () => this.#client.scroll(this.#documents, { limit: PAGE, with_payload: true, with_vector: false, ...(from === undefined ? {} : { offset: from }) }));
      for (const point of page.points) {
        // The spec point has no source.
        if (typeof point.payload?.source === 'string' && point.payload.source.startsWith(prefix)) out.push(toState(point.payload));
      }
      const next = page.next_page_offset;
      offset = typeof next === 'string' || typeof next === 'number' ? next : undefined;
    } while (offset !== undefined);
    return out;
  }

  async remove(sources: readonly string[]): Promise<void> {
    if (sources.length === 0) return;
    const rows = await this.#exists(this.#name);
    const states = await this.#exists(this.#documents);
    for (let at = 0; at < sources.length; at += 100) {
      const slice = sources.slice(at, at + 100);
      if (rows) await this.#call('remove rows', () => this.#client.delete(this.#name, { wait: true, filter: { must: [{ key: 'source', match: { any: slice } }] } }));
      if (states) await this.#call('remove states', () => this.#client.delete(this.#documents, { wait: true, points: slice.map((source) => pointId(`state:${source}`)) }));
    }
  }

  #filter(filter: string | undefined): QdrantFilter | undefined {
    return filter === undefined ? undefined : toQdrantFilter(parseFilter(filter));
  }

  async count(filter?: string): Promise<number> {
    if ((await this.describe()) === null) return 0;
    const where = this.#filter(filter);
    const result = await this.#call('count', () => this.#client.count(this.#name, { exact: true, ...(where === undefined ? {} : { filter: where }) }));
    return result.count;
  }

  async search(query: QueryVector, options: SearchOptions): Promise<SearchHit[]> {
    // The numbers this backend's client and scoring take: the store is the query vector's wire edge.
    const vector: readonly number[] = Array.isArray(query) ? query : Array.from(query);
    const spec = await this.describe();
    if (spec === null) throw new ShoalError(ErrorCode.NOT_FOUND, `no ${this.#where} (run shoal ingest first)`);
    checkQuery(vector, spec, options.k);
    const where = this.#filter(options.filter);
    const result = await this.#call('search', () =>
      this.#client.query(this.#name, {
        query: toFlatVector(vector, vectorTypeOf(spec)),
        using: 'dense',
        limit: candidateCount(options.k),
        // HNSW is approximate: a wider beam, the stored vectors, and the exact ranking every backend shares.
        params: { hnsw_ef: Math.max(SEARCH_EF, candidateCount(options.k)) },
        with_payload: true,
        with_vector: ['dense'],
        ...(where === undefined ? {} : { filter: where }),
      }),
    );
    const candidates = result.points.map((point) => ({ row: toHitRow(point.payload), vector: fromFlatVector(DenseOf.parse(point.vector), vectorTypeOf(spec)) }));
    return rankTyped(spec, vector, candidates, options.k);
  }

  /**
   * A query on the named sparse vector `sparse` (Qdrant scores it by dot product over an inverted
   * index, exact); the points come back with their sparse vectors and are ranked by rankSparse,
   * so the scores equal every other backend's.
   */
  async searchSparse(query: SparseValues, options: SearchOptions): Promise<SearchHit[]> {
    if ((await this.describe()) === null) throw new ShoalError(ErrorCode.NOT_FOUND, `no ${this.#where} (run shoal ingest first)`);
    checkSparseQuery(query, options.k);
    const where = this.#filter(options.filter);
    const result = await this.#call('sparse search', () =>
      this.#client.query(this.#name, {
        query: { indices: [...query.indices], values: [...query.values] },
        using: 'sparse',
        limit: candidateCount(options.k),
        with_payload: true,
        with_vector: ['sparse'],
        ...(where === undefined ? {} : { filter: where }),
      }),
    );
    const candidates = result.points.map((point) => ({ row: toHitRow(point.payload), sparse: SparseOf.parse(point.vector) }));
    return rankSparse(query, candidates, options.k);
  }

  /**
   * A query on the named multivector `multivector` (Qdrant's MaxSim over Cosine token vectors),
   * among `ids` when given (a `has_id` condition beside the filter). Scores are Qdrant's MaxSim.
   */
  async searchMultivector(query: readonly (readonly number[])[], options: MultivectorSearchOptions): Promise<SearchHit[]> {
    const spec = await this.describe();
    if (spec === null) throw new ShoalError(ErrorCode.NOT_FOUND, `no ${this.#where} (run shoal ingest first)`);
    checkMultivectorQuery(query, options.k);
    if (!spec.optionalColumns.includes('multivector')) throw new ShoalError(ErrorCode.INVALID_INPUT, `${this.#where} holds no multi-vectors (its pipeline had no encode.multivector model)`);
    if (options.ids !== undefined && options.ids.length === 0) return [];
    const where = this.#filter(options.filter);
    const must = [...(options.ids === undefined ? [] : [{ has_id: options.ids.map(pointId) }]), ...(where === undefined ? [] : [where])];
    const result = await this.#call('multi-vector search', () =>
      this.#client.query(this.#name, {
        query: query.map((token) => [...token]),
        using: 'multivector',
        limit: options.ids === undefined ? options.k : Math.max(options.k, options.ids.length),
        with_payload: true,
        ...(must.length === 0 ? {} : { filter: { must } }),
      }),
    );
    return result.points.map((point) => ({ row: toHitRow(point.payload), score: point.score })).sort(byScore).slice(0, options.k);
  }

  async optimize(): Promise<void> {
    // Qdrant builds and maintains its HNSW index itself.
  }

  async close(): Promise<void> {
    this.#spec = null;
  }
}
