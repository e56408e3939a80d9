import { ChromaClient, type Collection, type Metadata } from 'chromadb';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { redactUri } from '../../protocol/uri-credentials.js';
import { boundChromaRequests, checkRequestTimeout, DEFAULT_CHROMA_REQUEST_TIMEOUT_MS, isRequestTimeout } from './requests.js';
import { chromaMetadataFields } from './metadata.js';
import { toChromaWhere, type ChromaWhere } from './filter.js';
import { parseFilter } from '../shared/filter-tree.js';
import type { ChunkRow, Distance, DocumentState, MultivectorSearchOptions, SearchHit, SearchOptions, Store, SparseValues, TableSpec, QueryVector } from '../store.js';
import { noMultivector, refuseMultivector } from '../shared/multivector.js';
import { noSparse } from '../shared/sparse.js';
import { candidateCount, checkQuery, checkRowTypes, checkSpec, checkTableName, existsMatching, freezeSpec, keptOptional, rankTyped, StoredSpec, storedSpecOf, toHitRow, toState, vectorTypeOf } from '../shared/table-spec.js';
import { fromFlatVector, isBinaryType, toFlatVector } from '../shared/vector-types.js';

/**
 * Chroma (`chroma://host:port/COLLECTION`) through the chromadb client with our own vectors
 * (`embeddingFunction: null`). The collection's metadata carries `hnsw:space` and the Shoal spec;
 * the text is the record's document, the other columns its metadata (nulls left out). Per-source
 * states live in `COLLECTION__documents` (records with a one-number placeholder vector). Chroma
 * has no transactions: rows are upserted by id first and the states last, so a retry after a
 * failure rewrites the same ids. No sparse vectors (docs/storage.md). Every request is bounded by
 * `requestTimeoutMs` (chroma/requests.ts): a hung server is a TIMEOUT, retried by RetryingStore.
 */

export interface ChromaStoreOptions {
  host: string;
  port: number;
  ssl?: boolean;
  /** `COLLECTION`. @default 'chunks' */
  collection?: string;
  tenant?: string | undefined;
  database?: string | undefined;
  /** Extra headers, e.g. `x-chroma-token` or `Authorization` (never logged). */
  headers?: Record<string, string>;
  /** Records per upsert. @default 1000 */
  batchRows?: number;
  /** Longest wait for one request's answer (the request is aborted then: a TIMEOUT, retried). @default 60_000 */
  requestTimeoutMs?: number;
}

const SPACE: Readonly<Record<Distance, 'cosine' | 'l2' | 'ip'>> = { cosine: 'cosine', l2: 'l2', dot: 'ip' };
/**
 * The HNSW graph of a new collection. Chroma's defaults (16 neighbours, ef 100) found 91 % of
 * the exact top-10 ids among 100 candidates on 5,183 random 384-dimension vectors; 32 neighbours
 * with ef 400 found all of them at the same query time (inserts are slower).
 */
const HNSW = { ef_search: 400, ef_construction: 400, max_neighbors: 32 } as const;
const PAGE = 1_000;

/** The store a message names and the bound its requests run under. */
export interface Place {
  where: string;
  timeoutMs: number;
}

export function classify(error: unknown, what: string, place: Place): ShoalError {
  if (error instanceof ShoalError) return error;
  // A hung or overloaded server (or a proxy in front of a dead one): transient, never INTERNAL.
  if (isRequestTimeout(error)) {
    return new ShoalError(ErrorCode.TIMEOUT, `chroma ${what}: no answer from ${place.where} within the ${place.timeoutMs} ms request timeout`, { cause: error, details: { timeoutMs: place.timeoutMs } });
  }
  const name = error instanceof Error ? error.name : '';
  const message = error instanceof Error ? error.message : String(error);
  const transient = /ConnectionError|ServerError/.test(name) || /fetch failed|ECONNREFUSED|ECONNRESET|socket hang up|Failed to connect/i.test(message);
  return new ShoalError(transient ? ErrorCode.UNAVAILABLE : ErrorCode.INTERNAL, `chroma ${what}: ${message}`, { cause: error });
}

const SpecMetadata = z.object({ 'shoal:spec': z.string() }).passthrough();

export class ChromaStore implements Store {
  readonly #client: ChromaClient;
  readonly #name: string;
  readonly #where: string;
  readonly #batchRows: number;
  readonly #timeoutMs: number;
  #chunks: Collection | null = null;
  #documents: Collection | null = null;
  #spec: TableSpec | null = null;

  constructor(options: ChromaStoreOptions) {
    this.#name = checkTableName(options.collection ?? 'chunks');
    if (!/^[A-Za-z0-9]/.test(this.#name) || !/[A-Za-z0-9]$/.test(this.#name) || this.#name.length < 3) {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `Chroma collection ${JSON.stringify(this.#name)}: 3 to 48 characters, starting and ending with a letter or digit`);
    }
    this.#batchRows = options.batchRows ?? 1_000;
    this.#where = `collection ${this.#name} on ${redactUri(`chroma://${options.host}:${options.port}`)}`;
    this.#timeoutMs = checkRequestTimeout(options.requestTimeoutMs ?? DEFAULT_CHROMA_REQUEST_TIMEOUT_MS, this.#where);
    this.#client = new ChromaClient({
      host: options.host,
      port: options.port,
      ssl: options.ssl ?? false,
      ...(options.tenant === undefined ? {} : { tenant: options.tenant }),
      ...(options.database === undefined ? {} : { database: options.database }),
      ...(options.headers === undefined ? {} : { headers: options.headers }),
    });
    boundChromaRequests(this.#client, this.#timeoutMs);
  }

  async #call<T>(what: string, body: () => Promise<T>): Promise<T> {
    try {
      return await body();
    } catch (error) {
      throw classify(error, what, { where: this.#where, timeoutMs: this.#timeoutMs });
    }
  }

  /** The collection, or null when it does not exist (Chroma answers not-found with an error). */
  async #get(name: string): Promise<Collection | null> {
    const names = await this.#call('list', async () => {
      const out: string[] = [];
      for (let offset = 0; ; offset += 100) {
        const page = await this.#client.listCollections({ limit: 100, offset });
        out.push(...page.map((collection) => collection.name));
        if (page.length < 100) return out;
      }
    });
    if (!names.includes(name)) return null;
    return this.#call('open', () => this.#client.getCollection({ name }));
  }

  async #documentsCollection(): Promise<Collection> {
    this.#documents ??= await this.#call('create state collection', () =>
      this.#client.getOrCreateCollection({ name: `${this.#name}__documents`, embeddingFunction: null, metadata: { 'hnsw:space': 'l2' } }),
    );
    return this.#documents;
  }

  async describe(): Promise<TableSpec | null> {
    if (this.#spec !== null) return this.#spec;
    this.#chunks ??= await this.#get(this.#name);
    if (this.#chunks === null) return null;
    const meta = SpecMetadata.safeParse(this.#chunks.metadata ?? {});
    const stored = meta.success ? StoredSpec.safeParse(JSON.parse(meta.data['shoal:spec'])) : null;
    if (stored === null || !stored.success) throw new ShoalError(ErrorCode.CONFIG_INVALID, `${this.#where} was not written by shoal ingest`);
    this.#spec = freezeSpec(stored.data);
    return this.#spec;
  }

  async prepare(spec: TableSpec): Promise<void> {
    refuseMultivector(spec, 'Chroma', this.#where);
    // Refused before anything is created: a pipeline with sparse vectors would lose them here.
    if (spec.optionalColumns.includes('sparse')) throw noSparse('Chroma', this.#where);
    if (await existsMatching(() => this.describe(), spec, this.#where)) return;
    const stored = storedSpecOf(spec);
    const space = isBinaryType(vectorTypeOf(spec)) ? 'l2' : SPACE[spec.distance];
    this.#chunks = await this.#call('create collection', () =>
      this.#client.getOrCreateCollection({
        name: this.#name,
        embeddingFunction: null,
        // Binary vectors are stored as 0/1 bits (Chroma has only float32): their squared L2 distance is the Hamming distance.
        // The configuration sets the index; `hnsw:space` in the metadata repeats the space for readers.
        configuration: { hnsw: { space, ...HNSW } },
        metadata: { 'hnsw:space': space, 'shoal:spec': JSON.stringify(stored) },
      }),
    );
    this.#spec = null;
    checkSpec((await this.describe()) ?? spec, spec, this.#where);
  }

  async states(sources: readonly string[]): Promise<Map<string, DocumentState>> {
    const out = new Map<string, DocumentState>();
    if (sources.length === 0) return out;
    const documents = await this.#documentsCollection();
    for (let at = 0; at < sources.length; at += PAGE) {
      const found = await this.#call('states', () => documents.get({ ids: sources.slice(at, at + PAGE), include: ['metadatas'] }));
      for (const metadata of found.metadatas) {
        if (metadata === null) continue;
        const state = toState(metadata);
        out.set(state.source, state);
      }
    }
    return out;
  }

  async commit(rows: readonly ChunkRow[], states: readonly DocumentState[]): Promise<void> {
    if (states.length === 0) return;
    const spec = rows.length > 0 ? await this.describe() : null;
    if (rows.length > 0 && (spec === null || this.#chunks === null)) throw new ShoalError(ErrorCode.INTERNAL, `${this.#where} must be prepared before rows are written`);
    checkRowTypes(rows, spec);
    const type = vectorTypeOf(spec ?? {});
    const chunks = this.#chunks ?? (await this.#get(this.#name));
    if (chunks !== null) {
      const optional = spec?.optionalColumns ?? [];
      for (let at = 0; at < rows.length; at += this.#batchRows) {
        const batch = rows.slice(at, at + this.#batchRows);
        await this.#call('upsert', () =>
          chunks.upsert({
            ids: batch.map((row) => row.id),
            embeddings: batch.map((row) => toFlatVector(row.vector, type)),
            documents: batch.map((row) => row.text),
            metadatas: batch.map((row) => toMetadata(row, keptOptional(row, optional))),
          }),
        );
      }
      await this.#deleteStale(chunks, states);
    }
    const documents = await this.#documentsCollection();
    for (let at = 0; at < states.length; at += this.#batchRows) {
      const batch = states.slice(at, at + this.#batchRows);
      await this.#call('states', () =>
        documents.upsert({ ids: batch.map((s) => s.source), embeddings: batch.map(() => [0]), metadatas: batch.map((s): Metadata => ({ ...s })) }),
      );
    }
  }

  /** Rows of these sources from another content hash or other settings. */
  async #deleteStale(chunks: Collection, states: readonly DocumentState[]): Promise<void> {
    const current = new Map(states.map((state) => [state.source, state]));
    for (let at = 0; at < states.length; at += PAGE) {
      const sources = states.slice(at, at + PAGE).map((state) => state.source);
      const stale: string[] = [];
      for (let offset = 0; ; offset += PAGE) {
        const found = await this.#call('find stale rows', () => chunks.get({ where: { source: { $in: sources } }, include: ['metadatas'], limit: PAGE, offset }));
        found.ids.forEach((id, index) => {
          const metadata = found.metadatas[index];
          const state = current.get(String(metadata?.source));
          if (state !== undefined && (metadata?.document_id !== state.document_id || metadata.settings !== state.settings)) stale.push(id);
        });
        if (found.ids.length < PAGE) break;
      }
      for (let from = 0; from < stale.length; from += PAGE) {
        const ids = stale.slice(from, from + PAGE);
        await this.#call('delete stale rows', () => chunks.delete({ ids }));
      }
    }
  }

  async statesUnder(prefix: string): Promise<DocumentState[]> {
    const documents = await this.#documentsCollection();
    const out: DocumentState[] = [];
    // Chroma's where has no prefix match: the state records (one per source, id = source) are paged through.
    for (let offset = 0; ; offset += PAGE) {
      const found = await this.#call('states', () => documents.get({ include: ['metadatas'], limit: PAGE, offset }));
      found.ids.forEach((id, index) => {
        const metadata = found.metadatas[index];
        if (id.startsWith(prefix) && metadata !== null && metadata !== undefined) out.push(toState(metadata));
      });
      if (found.ids.length < PAGE) return out;
    }
  }

  async remove(sources: readonly string[]): Promise<void> {
    if (sources.length === 0) return;
    const chunks = this.#chunks ?? (await this.#get(this.#name));
    const documents = await this.#documentsCollection();
    for (let at = 0; at < sources.length; at += PAGE) {
      const slice = sources.slice(at, at + PAGE);
      if (chunks !== null) await this.#call('remove rows', () => chunks.delete({ where: { source: { $in: slice } } }));
      await this.#call('remove states', () => documents.delete({ ids: slice }));
    }
  }

  #filter(filter: string | undefined): ChromaWhere | undefined {
    return filter === undefined ? undefined : toChromaWhere(parseFilter(filter));
  }

  async count(filter?: string): Promise<number> {
    if ((await this.describe()) === null || this.#chunks === null) return 0;
    const chunks = this.#chunks;
    const where = this.#filter(filter);
    if (where === undefined) return this.#call('count', () => chunks.count());
    let total = 0;
    for (let offset = 0; ; offset += PAGE) {
      const found = await this.#call('count', () => chunks.get({ where, include: [], limit: PAGE, offset }));
      total += found.ids.length;
      if (found.ids.length < PAGE) return total;
    }
  }

  async searchMultivector(_query: readonly (readonly number[])[], _options: MultivectorSearchOptions): Promise<SearchHit[]> {
    throw noMultivector('Chroma', this.#where);
  }

  async searchSparse(_query: SparseValues, _options: SearchOptions): Promise<SearchHit[]> {
    throw noSparse('Chroma', this.#where);
  }

  async search(query: QueryVector, options: SearchOptions): Promise<SearchHit[]> {
    // The numbers this backend's client and scoring take: the store is the query vector's wire edge.
    const vector: readonly number[] = Array.isArray(query) ? query : Array.from(query);
    const spec = await this.describe();
    if (spec === null || this.#chunks === null) throw new ShoalError(ErrorCode.NOT_FOUND, `no ${this.#where} (run shoal ingest first)`);
    checkQuery(vector, spec, options.k);
    const chunks = this.#chunks;
    const where = this.#filter(options.filter);
    // HNSW is approximate: over-fetch with the embeddings and rank the candidates exactly, so the
    // top k is the one every other backend gives for the same rows.
    const result = await this.#call('search', () =>
      chunks.query({
        queryEmbeddings: [toFlatVector(vector, vectorTypeOf(spec))],
        nResults: candidateCount(options.k),
        include: ['metadatas', 'documents', 'embeddings'],
        ...(where === undefined ? {} : { where }),
      }),
    );
    const embeddings = result.embeddings[0] ?? [];
    const candidates = (result.ids[0] ?? []).map((id, index) => {
      const embedding = embeddings[index];
      if (embedding === undefined || embedding === null) throw new ShoalError(ErrorCode.INTERNAL, `${this.#where} returned row ${id} without its embedding`);
      return { row: toHitRow({ ...result.metadatas[0]?.[index], id, text: result.documents[0]?.[index] ?? '' }), vector: fromFlatVector(embedding, vectorTypeOf(spec)) };
    });
    return rankTyped(spec, vector, candidates, options.k);
  }

  async optimize(): Promise<void> {
    // Chroma maintains its HNSW index itself.
  }

  async close(): Promise<void> {
    this.#chunks = null;
    this.#documents = null;
  }
}

function toMetadata(row: ChunkRow, optional: { entities: string | null; labels: string | null }): Metadata {
  const out: Metadata = {
    id: row.id, document_id: row.document_id, source: row.source, page: row.page, chunk: row.chunk,
    start: row.start, end: row.end, settings: row.settings, ingested_at: row.ingested_at,
  };
  if (row.heading !== null) out.heading = row.heading;
  if (optional.entities !== null) out.entities = optional.entities;
  if (optional.labels !== null) out.labels = optional.labels;
  return { ...out, ...chromaMetadataFields(row.metadata) };
}
