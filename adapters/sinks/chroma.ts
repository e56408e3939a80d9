import { ChromaClient, type Collection, type Metadata } from 'chromadb';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { toChromaWhere, type ChromaWhere } from './filter-stores.js';
import { parseFilter } from './filter-tree.js';
import type { ChunkRow, Distance, DocumentState, SearchHit, SearchOptions, Sink, TableSpec } from './sink.js';
import { byScore, checkQuery, checkSpec, checkTableName, existsMatching, freezeSpec, keptOptional, StoredSpec, storedSpecOf, toHitRow, toState } from './table-spec.js';

/**
 * Chroma (`chroma://host:port/COLLECTION`) through the chromadb client with our own vectors
 * (`embeddingFunction: null`). The collection's metadata carries `hnsw:space` and the Shoal spec;
 * the text is the record's document, the other columns its metadata (nulls left out). Per-source
 * states live in `COLLECTION__documents` (records with a one-number placeholder vector). Chroma
 * has no transactions: rows are upserted by id first and the states last, so a retry after a
 * failure rewrites the same ids. No sparse vectors (docs/storage.md).
 */

export interface ChromaSinkOptions {
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
}

const SPACE: Readonly<Record<Distance, string>> = { cosine: 'cosine', l2: 'l2', dot: 'ip' };
/** Higher than Chroma's default (10) so the HNSW answers agree with an exact scan on ordinary corpora. */
const SEARCH_EF = 200;
const PAGE = 1_000;

/** Chroma's distance → Shoal's score: its l2 is already squared, its ip is 1 − dot. */
function scoreFrom(distance: Distance, value: number): number {
  if (distance === 'l2') return -value;
  return 1 - value;
}

function classify(error: unknown, what: string): ShoalError {
  if (error instanceof ShoalError) return error;
  const name = error instanceof Error ? error.name : '';
  const message = error instanceof Error ? error.message : String(error);
  const transient = /ConnectionError|ServerError/.test(name) || /fetch failed|ECONNREFUSED|ECONNRESET|socket hang up|Failed to connect/i.test(message);
  return new ShoalError(transient ? ErrorCode.UNAVAILABLE : ErrorCode.INTERNAL, `chroma ${what}: ${message}`, { cause: error });
}

const SpecMetadata = z.object({ 'shoal:spec': z.string() }).passthrough();

export class ChromaSink implements Sink {
  readonly #client: ChromaClient;
  readonly #name: string;
  readonly #where: string;
  readonly #batchRows: number;
  #chunks: Collection | null = null;
  #documents: Collection | null = null;
  #spec: TableSpec | null = null;

  constructor(options: ChromaSinkOptions) {
    this.#name = checkTableName(options.collection ?? 'chunks');
    if (!/^[A-Za-z0-9]/.test(this.#name) || !/[A-Za-z0-9]$/.test(this.#name) || this.#name.length < 3) {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `Chroma collection ${JSON.stringify(this.#name)}: 3 to 48 characters, starting and ending with a letter or digit`);
    }
    this.#batchRows = options.batchRows ?? 1_000;
    this.#where = `collection ${this.#name} on chroma://${options.host}:${options.port}`;
    this.#client = new ChromaClient({
      host: options.host,
      port: options.port,
      ssl: options.ssl ?? false,
      ...(options.tenant === undefined ? {} : { tenant: options.tenant }),
      ...(options.database === undefined ? {} : { database: options.database }),
      ...(options.headers === undefined ? {} : { headers: options.headers }),
    });
  }

  async #call<T>(what: string, body: () => Promise<T>): Promise<T> {
    try {
      return await body();
    } catch (error) {
      throw classify(error, what);
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
    if (await existsMatching(() => this.describe(), spec, this.#where)) return;
    const stored = storedSpecOf(spec);
    this.#chunks = await this.#call('create collection', () =>
      this.#client.getOrCreateCollection({
        name: this.#name,
        embeddingFunction: null,
        metadata: { 'hnsw:space': SPACE[spec.distance], 'hnsw:search_ef': SEARCH_EF, 'hnsw:construction_ef': SEARCH_EF, 'shoal:spec': JSON.stringify(stored) },
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
    const chunks = this.#chunks ?? (await this.#get(this.#name));
    if (chunks !== null) {
      const optional = spec?.optionalColumns ?? [];
      for (let at = 0; at < rows.length; at += this.#batchRows) {
        const batch = rows.slice(at, at + this.#batchRows);
        await this.#call('upsert', () =>
          chunks.upsert({
            ids: batch.map((row) => row.id),
            embeddings: batch.map((row) => Array.from(row.vector)),
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

  async search(vector: readonly number[], options: SearchOptions): Promise<SearchHit[]> {
    const spec = await this.describe();
    if (spec === null || this.#chunks === null) throw new ShoalError(ErrorCode.NOT_FOUND, `no ${this.#where} (run shoal ingest first)`);
    checkQuery(vector, spec, options.k);
    const chunks = this.#chunks;
    const where = this.#filter(options.filter);
    const result = await this.#call('search', () =>
      chunks.query({ queryEmbeddings: [[...vector]], nResults: options.k, include: ['metadatas', 'documents', 'distances'], ...(where === undefined ? {} : { where }) }),
    );
    const ids = result.ids[0] ?? [];
    const hits = ids.map((id, index) => ({
      row: toHitRow({ ...result.metadatas[0]?.[index], id, text: result.documents[0]?.[index] ?? '' }),
      score: scoreFrom(spec.distance, result.distances[0]?.[index] ?? Number.NaN),
    }));
    return hits.sort(byScore);
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
  return out;
}
