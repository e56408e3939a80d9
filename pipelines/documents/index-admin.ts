import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import {
  DEFAULT_DOCUMENTS_PAGE,
  MAX_DOCUMENTS_OFFSET,
  MAX_DOCUMENTS_PAGE,
  MAX_SOURCE_CHARS,
  type IndexDeleted,
  type IndexDocumentsPage,
  type IndexStats,
  type IndexTables,
} from '../../adapters/protocol/index-admin.js';
import { sqlString, validateFilter } from '../../adapters/stores/shared/filter.js';
import type { IndexAdmin, TableEntry } from '../../adapters/stores/shared/index-admin.js';
import type { OpenedStore } from '../../adapters/stores/open.js';
import type { TableSpec } from '../../adapters/stores/store.js';

/**
 * Index management, one implementation for `shoal index` and the gateway's /v1/indexes routes:
 * a table's statistics, its documents page by page, the deletion of one document, the tables of
 * the store. Per-document work goes through the Store (states, counts, remove: what ingest itself
 * uses, so a deleted source is re-indexed by the next ingest), the store-wide facts through its
 * IndexAdmin (adapters/stores/shared/index-admin.ts). `label` names the index in answers and messages:
 * the URI without credentials on the command line, the configured name on the gateway.
 */

export interface DocumentsPageOptions {
  /** @default DEFAULT_DOCUMENTS_PAGE */
  limit?: number | undefined;
  /** @default 0 */
  offset?: number | undefined;
  /** Only sources starting with this. */
  sourcePrefix?: string | undefined;
}

async function withAdmin<T>(opened: OpenedStore, body: (admin: IndexAdmin) => Promise<T>): Promise<T> {
  const admin = await opened.openAdmin();
  try {
    return await body(admin);
  } finally {
    await admin.close();
  }
}

function tableList(tables: readonly TableEntry[]): string {
  return tables.map((table) => `${table.name} (${table.rows} rows)`).join(', ');
}

/**
 * NOT_FOUND for a table the index does not hold, naming the ones it does (`--table chunkz`
 * answered "nothing has been indexed there" while `chunks` sat beside it).
 */
export async function missingTableError(opened: OpenedStore, label: string): Promise<ShoalError> {
  let tables: TableEntry[] | null = null;
  try {
    tables = await withAdmin(opened, (admin) => admin.tables());
  } catch {
    // The listing is a courtesy: the store's own failure shows on the next call that needs it.
  }
  const where = `no table ${JSON.stringify(opened.table)} in ${label}`;
  const message =
    tables === null ? `${where} (run shoal ingest first)`
      : tables.length === 0 ? `${where}: it holds no tables yet (run shoal ingest first; a document that gives no text adds no rows)`
        : `${where}; its tables: ${tableList(tables)}`;
  return new ShoalError(ErrorCode.NOT_FOUND, message, { details: { table: opened.table, ...(tables === null ? {} : { tables: tables.map((table) => table.name) }) } });
}

/** The table's spec, or NOT_FOUND listing the tables there are. */
export async function requireTable(opened: OpenedStore, label: string): Promise<TableSpec> {
  const spec = await opened.store.describe();
  if (spec === null) throw await missingTableError(opened, label);
  return spec;
}

export async function indexStats(opened: OpenedStore, label: string): Promise<IndexStats> {
  const spec = await requireTable(opened, label);
  const rows = await opened.store.count();
  const states = await opened.store.statesUnder('');
  let last: string | null = null;
  for (const state of states) if (last === null || state.ingested_at > last) last = state.ingested_at;
  const size = await withAdmin(opened, (admin) => admin.sizeBytes(opened.table));
  return {
    index: label,
    backend: opened.backend,
    table: opened.table,
    rows,
    documents: states.length,
    dimension: spec.dimension,
    distance: spec.distance,
    vector_type: spec.vectorType ?? 'float32',
    optional_columns: [...spec.optionalColumns],
    model: spec.metadata.model ?? null,
    metadata: { ...spec.metadata },
    size_bytes: size,
    last_ingested_at: last,
  };
}

function checkedPage(options: DocumentsPageOptions): { limit: number; offset: number; prefix: string } {
  const limit = options.limit ?? DEFAULT_DOCUMENTS_PAGE;
  const offset = options.offset ?? 0;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_DOCUMENTS_PAGE) throw new ShoalError(ErrorCode.INVALID_INPUT, `limit must be a whole number from 1 to ${MAX_DOCUMENTS_PAGE} (got ${limit})`, { details: { field: 'limit' } });
  if (!Number.isInteger(offset) || offset < 0 || offset > MAX_DOCUMENTS_OFFSET) throw new ShoalError(ErrorCode.INVALID_INPUT, `offset must be a whole number from 0 to ${MAX_DOCUMENTS_OFFSET} (got ${offset})`, { details: { field: 'offset' } });
  const prefix = options.sourcePrefix ?? '';
  if (prefix.length > MAX_SOURCE_CHARS) throw new ShoalError(ErrorCode.INPUT_TOO_LARGE, `the source prefix has ${prefix.length} characters, at most ${MAX_SOURCE_CHARS}`, { details: { field: 'source_prefix' } });
  return { limit, offset, prefix };
}

/**
 * One page of the table's documents, by source. The states are read whole (one small record per
 * document, as `shoal ingest --prune` reads them) and cut here: every store answers the same
 * order, whatever its own paging.
 */
export async function listDocuments(opened: OpenedStore, label: string, options: DocumentsPageOptions = {}): Promise<IndexDocumentsPage> {
  const { limit, offset, prefix } = checkedPage(options);
  // First: reading the states of a table that does not exist would create its state table (LanceDB).
  await requireTable(opened, label);
  const states = await opened.store.statesUnder(prefix);
  states.sort((a, b) => (a.source < b.source ? -1 : a.source > b.source ? 1 : 0));
  const page = states.slice(offset, offset + limit);
  return {
    index: label,
    table: opened.table,
    total: states.length,
    offset,
    limit,
    source_prefix: prefix === '' ? null : prefix,
    documents: page.map((state) => ({ source: state.source, document_id: state.document_id, chunks: state.chunks, pages: state.pages, settings: state.settings, ingested_at: state.ingested_at })),
    next_offset: offset + page.length < states.length ? offset + page.length : null,
  };
}

/**
 * Deletes one source: its rows, then its state (Store.remove, as `--prune` does), so the next
 * `shoal ingest` of it indexes it afresh. NOT_FOUND when the table holds neither a state nor rows
 * of it (a mistyped source is said, not silently "deleted"); deleting twice answers NOT_FOUND the
 * second time and changes nothing.
 */
export async function deleteDocument(opened: OpenedStore, label: string, source: string): Promise<IndexDeleted> {
  if (source === '') throw new ShoalError(ErrorCode.INVALID_INPUT, 'the source to delete is empty', { details: { field: 'source' } });
  if (source.length > MAX_SOURCE_CHARS) throw new ShoalError(ErrorCode.INPUT_TOO_LARGE, `the source has ${source.length} characters, at most ${MAX_SOURCE_CHARS}`, { details: { field: 'source' } });
  await requireTable(opened, label);
  const state = (await opened.store.states([source])).get(source);
  const chunks = await opened.store.count(validateFilter(`source = ${sqlString(source)}`));
  if (state === undefined && chunks === 0) {
    throw new ShoalError(ErrorCode.NOT_FOUND, `no document ${JSON.stringify(source)} in table ${opened.table} of ${label} (list them with shoal index documents, or GET /v1/indexes/NAME/documents)`, {
      details: { source, table: opened.table },
    });
  }
  await opened.store.remove([source]);
  return { index: label, table: opened.table, source, documents: state === undefined ? 0 : 1, chunks };
}

export async function listTables(opened: OpenedStore, label: string): Promise<IndexTables> {
  const tables = await withAdmin(opened, (admin) => admin.tables());
  return { index: label, backend: opened.backend, tables };
}
