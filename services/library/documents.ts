import { ShoalSettings } from '../settings/shoal-settings.js';
import { z } from 'zod';
import type { CallOptions, Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { DocumentMetadata } from '../../adapters/protocol/metadata.js';
import type { StoreWriteObserver } from '../../adapters/stores/shared/delivery.js';
import { validateFilter } from '../../adapters/stores/shared/filter.js';
import { openStore, parseIndexRef, redactUri, type OpenedStore } from '../../adapters/stores/open.js';
import type { Store } from '../../adapters/stores/store.js';
import { resolvePipeline } from '../../pipelines/documents/builtin.js';
import { applyOverrides, modelPathFromCwd, TableName } from '../../pipelines/documents/definition.js';
import { ingestInProcess } from '../../pipelines/documents/ingest-local.js';
import type { IngestProgress, IngestSummary } from '../../pipelines/documents/runner.js';
import { hitLine, SEARCH_MODES, searchIndex, type HitLine, type SearchMode, type SearchQuery } from '../../pipelines/documents/search.js';
import { searchDocuments, type DocumentLine } from '../../pipelines/documents/search-groups.js';
import { fileSources, recordSource, addRecordSources, SourceRecord, type PendingSource } from '../../pipelines/documents/sources.js';

/**
 * `import { ingest, search, openIndex } from 'shoal'`: what `shoal ingest` and `shoal search` do,
 * as functions over an engine you hold (`new InferenceEngine(...)`, or a NatsEngine). They run the
 * same code as the CLI (pipelines/documents: ingest-local.ts, search.ts; adapters/stores/open.ts):
 * the same rows, ids and skip-if-unchanged rule, so an index built here is searched by the CLI
 * and the other way round. Options are checked with zod (a wrong value is INVALID_INPUT, naming it).
 */

/** Where an index lives and how to reach it: `shoal ingest --index` / `--table` and the credentials of the environment. */
export interface OpenIndexOptions {
  /** Table or collection when the URI names none. @default 'chunks' */
  table?: string | undefined;
  /** PGPASSWORD, CHROMA_API_KEY, QDRANT_API_KEY, S3 settings… are read from here. @default process.env */
  env?: NodeJS.ProcessEnv | undefined;
  /** Ends the retries of a failing store. */
  signal?: AbortSignal | undefined;
  /** Told of each write failure and recovery (the CLI's degraded mark). */
  observer?: StoreWriteObserver | undefined;
}

export type { OpenedStore } from '../../adapters/stores/open.js';

/**
 * An index URI (a folder = LanceDB, `lancedb://`, `postgres://`, `chroma://`, `qdrant://`,
 * `file://`, `s3://`; docs/storage.md) → its sink, the table the rows go to, and a printable
 * name without credentials. Close `sink` when done. The CLI opens its `--index` with this.
 */
export function openIndex(index: string, options: OpenIndexOptions = {}): OpenedStore {
  const settings = options.env === undefined ? ShoalSettings.fromEnvironment() : ShoalSettings.of(options.env);
  const ref = parseIndexRef(index, { table: options.table ?? 'chunks', credentials: settings.stores, s3: settings.s3 });
  return openStore(ref, {
    retry: options.signal === undefined ? {} : { signal: options.signal },
    ...(options.observer === undefined ? {} : { observer: options.observer }),
  });
}

/** A record to index: inline text, or a file (relative to `baseDir`), named by `id` (its source in the index). */
/** `metadata`: stored with the document's chunks, filterable as metadata.<field> (adapters/protocol/metadata.ts). */
export type IngestRecord = ({ id: string | number; text: string } | { id: string | number; path: string }) & { metadata?: DocumentMetadata };

const Strings = z.array(z.string().min(1)).optional();
const IngestOptionsSchema = z.object({
  paths: Strings,
  records: z.array(z.unknown()).optional(),
  baseDir: z.string().min(1).optional(),
  pipeline: z.string().min(1).optional(),
  model: z.string().min(1).optional(),
  index: z.string().min(1).optional(),
  table: TableName.optional(),
  ocr: z.enum(['auto', 'always', 'never']).optional(),
  chunkSize: z.number().int().min(8).max(8192).optional(),
  chunkOverlap: z.number().int().min(0).max(4096).optional(),
  include: Strings,
  exclude: Strings,
  hidden: z.boolean().optional(),
  force: z.boolean().optional(),
});

export interface IngestOptions {
  /** Files, folders (walked recursively, dot names left out unless `hidden`) and `s3://bucket/prefix`. */
  paths?: readonly string[] | undefined;
  /** Records, as `shoal ingest -` reads them from stdin (ids unique, and no file path of `paths`). */
  records?: readonly IngestRecord[] | undefined;
  /** Folder a record's `path` is relative to. @default process.cwd() */
  baseDir?: string | undefined;
  /** A built-in pipeline name or a YAML/JSON pipeline file (docs/ingest.md). @default 'documents' */
  pipeline?: string | undefined;
  /** The encode stage's model (a catalog name, hub id or local folder). @default the pipeline's */
  model?: string | undefined;
  /** Where the rows go (see openIndex). @default the pipeline's, ./shoal-index */
  index?: string | undefined;
  /** @default the pipeline's, 'chunks' */
  table?: string | undefined;
  ocr?: 'auto' | 'always' | 'never' | undefined;
  /** Chunk size in the encoder's tokens, 8 to 8192 (`--chunk-size`). @default the pipeline's, 200 */
  chunkSize?: number | undefined;
  /** Tokens repeated between chunks, below the size (`--chunk-overlap`). @default min(32, size / 4) */
  chunkOverlap?: number | undefined;
  /** Globs (relative to each folder) a file must match; none = every file. */
  include?: readonly string[] | undefined;
  exclude?: readonly string[] | undefined;
  hidden?: boolean | undefined;
  /** Redo documents already indexed unchanged. */
  force?: boolean | undefined;
  /** Credentials and S3 settings, as openIndex. @default process.env */
  env?: NodeJS.ProcessEnv | undefined;
  /**
   * Stops the run: it rejects with a ShoalError CANCELLED; `interruptedSummary(error)` gives what
   * finished (committed documents stay indexed; the same call again continues).
   */
  signal?: AbortSignal | undefined;
  /** Called as documents are read and committed. */
  onProgress?: ((progress: IngestProgress) => void) | undefined;
}

/** `shoal ingest --json`'s summary: counts, failures (each with its code), and where the rows went. */
export interface IngestResult extends IngestSummary {
  /** The index URI, credentials removed. */
  index: string;
  table: string;
  pipeline: string;
}

function invalid(what: string, error: z.ZodError): ShoalError {
  const issue = error.issues[0];
  return new ShoalError(ErrorCode.INVALID_INPUT, `${what}: ${issue === undefined ? 'invalid' : `${issue.path.join('.') || 'value'}: ${issue.message}`}`);
}

/** Records → sources, refused as `shoal ingest -` refuses its lines (the index in the message is the record's). */
function sourcesOfRecords(records: readonly unknown[], baseDir: string, maxBytes: number): PendingSource[] {
  const ids = new Set<string>();
  return records.map((value, index) => {
    const parsed = SourceRecord.safeParse(value);
    if (!parsed.success) throw new ShoalError(ErrorCode.INVALID_INPUT, `records[${index}]: expected {id, text} or {id, path}`);
    if (ids.has(parsed.data.id)) throw new ShoalError(ErrorCode.INVALID_INPUT, `records[${index}]: duplicate id ${JSON.stringify(parsed.data.id)}`);
    ids.add(parsed.data.id);
    return recordSource(parsed.data, baseDir, maxBytes);
  });
}

/**
 * Parses, chunks, embeds and writes documents into an index, skipping those already indexed
 * unchanged: `shoal ingest` without `--nats`. Documents that fail are listed in `failed` (the run
 * goes on); it rejects only for a wrong option, an unreachable index, or `signal`.
 */
export async function ingest(engine: Engine, options: IngestOptions): Promise<IngestResult> {
  const parsed = IngestOptionsSchema.safeParse(options);
  if (!parsed.success) throw invalid('ingest options', parsed.error);
  const given = parsed.data;
  const definition = applyOverrides(await resolvePipeline(given.pipeline), {
    model: given.model === undefined ? undefined : modelPathFromCwd(given.model),
    ocr: given.ocr,
    index: given.index,
    table: given.table,
    chunkSize: given.chunkSize,
    chunkOverlap: given.chunkOverlap,
  });
  const { maxBytes } = definition.stages.parse;
  const sources = await fileSources(given.paths ?? [], { include: given.include ?? [], exclude: given.exclude ?? [], hidden: given.hidden === true, followLinks: true, maxBytes });
  addRecordSources(sources, sourcesOfRecords(given.records ?? [], given.baseDir ?? process.cwd(), maxBytes));
  if (sources.length === 0) throw new ShoalError(ErrorCode.INVALID_INPUT, 'nothing to ingest: no file found under paths and no records');
  const { store: sink, table } = openIndex(definition.stages.write.index, { table: definition.stages.write.table, env: options.env, signal: options.signal });
  try {
    const summary = await ingestInProcess({ definition, engine, sink, sources, force: given.force, signal: options.signal, onProgress: options.onProgress });
    return { ...summary, index: redactUri(definition.stages.write.index), table, pipeline: definition.name };
  } finally {
    await sink.close();
  }
}

const SearchOptionsSchema = z.object({
  query: z.string().refine((query) => query.trim() !== '', 'the query is empty'),
  index: z.string().min(1).optional(),
  table: z.string().min(1).optional(),
  k: z.number().int().min(1).max(1000).optional(),
  model: z.string().min(1).optional(),
  rerank: z.string().min(1).optional(),
  mode: z.enum(SEARCH_MODES).optional(),
  filter: z.string().optional(),
});

export interface SearchOptions {
  query: string;
  /** @default './shoal-index' */
  index?: string | undefined;
  /** @default 'chunks' */
  table?: string | undefined;
  /** Hits, 1 to 1000. @default 10 */
  k?: number | undefined;
  /** Query encoder. @default the model the index was built with */
  model?: string | undefined;
  /** Cross-encoder that rescores the candidates. */
  rerank?: string | undefined;
  /** @default hybrid on an index with sparse vectors, else dense */
  mode?: SearchMode | undefined;
  /** SQL where-clause over the metadata columns (`shoal search --filter`, docs/ingest.md). */
  filter?: string | undefined;
  env?: NodeJS.ProcessEnv | undefined;
  signal?: AbortSignal | undefined;
}

export type SearchHit = HitLine;
/** One document of a grouped search: its best chunk's score and its best chunks (at most 3). */
export type SearchDocument = DocumentLine;

/** The chunks nearest the query, best first: `shoal search`'s lines, as objects. NOT_FOUND when nothing was indexed there. */
export async function search(engine: Engine, options: SearchOptions): Promise<SearchHit[]> {
  return withSearch(options, async (sink, query, call) => (await searchIndex(engine, sink, query, call)).map((hit, index) => hitLine(index + 1, hit)));
}

/**
 * The k documents nearest the query, best first (`shoal search --group-by document`): each scored
 * by its best chunk, with its best chunks; `k` counts documents.
 */
export async function searchByDocument(engine: Engine, options: SearchOptions): Promise<SearchDocument[]> {
  return withSearch(options, (sink, query, call) => searchDocuments(engine, sink, query, call));
}

async function withSearch<T>(options: SearchOptions, run: (sink: Store, query: SearchQuery, call: CallOptions) => Promise<T>): Promise<T> {
  const parsed = SearchOptionsSchema.safeParse(options);
  if (!parsed.success) throw invalid('search options', parsed.error);
  const given = parsed.data;
  const filter = given.filter === undefined ? undefined : validateFilter(given.filter);
  const { store: sink, display, table } = openIndex(given.index ?? './shoal-index', { table: given.table, env: options.env, signal: options.signal });
  try {
    const query: SearchQuery = { query: given.query, k: given.k ?? 10, filter, model: given.model, mode: given.mode, rerank: given.rerank, where: `${display} (table ${table})` };
    return await run(sink, query, options.signal === undefined ? {} : { signal: options.signal });
  } finally {
    await sink.close();
  }
}
