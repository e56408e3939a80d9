import type { IndexDeleted, IndexDocumentsPage, IndexStats, IndexTables } from '../../../adapters/protocol/index-admin.js';
import { printable } from '../printable.js';

/** The readable text of `shoal index` (without --json): aligned `key  value` lines, names made printable. */

function rows(pairs: ReadonlyArray<readonly [string, string]>): string {
  const width = Math.max(...pairs.map(([key]) => key.length));
  return pairs.map(([key, value]) => `${key.padEnd(width)}  ${value}\n`).join('');
}

/** 1536 → "1.5 KiB (1536 bytes)". */
export function humanBytes(bytes: number): string {
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 'bytes';
  for (const next of units) {
    if (value < 1024) break;
    value /= 1024;
    unit = next;
  }
  return unit === 'bytes' ? `${bytes} bytes` : `${value.toFixed(1)} ${unit} (${bytes} bytes)`;
}

export function formatIndexStats(stats: IndexStats): string {
  const metadata = Object.entries(stats.metadata).map(([key, value]) => `${printable(key)}=${printable(value)}`);
  return rows([
    ['index', `${printable(stats.index)} (${stats.backend})`],
    ['table', stats.table],
    ['rows', String(stats.rows)],
    ['documents', String(stats.documents)],
    ['model', stats.model === null ? 'not recorded' : printable(stats.model)],
    ['vectors', `${stats.dimension} ${stats.vector_type}, ${stats.distance}`],
    ['optional columns', stats.optional_columns.length === 0 ? 'none' : stats.optional_columns.join(', ')],
    ['metadata', metadata.length === 0 ? 'none' : metadata.join(', ')],
    ['size', stats.size_bytes === null ? `not known (${stats.backend} does not say)` : humanBytes(stats.size_bytes)],
    ['last ingest', stats.last_ingested_at ?? 'never'],
  ]);
}

export function formatIndexDocuments(page: IndexDocumentsPage): string {
  const lines = page.documents.map((doc) => `${printable(doc.source)}  ${doc.chunks} chunks, ${doc.pages} pages, ${doc.ingested_at}`);
  const shown = page.documents.length === 0 ? `none of ${page.total}` : `${page.offset + 1}-${page.offset + page.documents.length} of ${page.total}`;
  const next = page.next_offset === null ? '' : `; next page: --offset ${page.next_offset}`;
  const prefix = page.source_prefix === null ? '' : ` under ${printable(page.source_prefix)}`;
  return `${lines.map((line) => `${line}\n`).join('')}documents ${shown}${prefix} (table ${page.table} in ${printable(page.index)})${next}\n`;
}

export function formatIndexDeleted(deleted: IndexDeleted): string {
  const state = deleted.documents === 1 ? 'and its state' : '(it had no state: rows of an interrupted run)';
  return `deleted ${printable(deleted.source)}: ${deleted.chunks} chunks ${state} from table ${deleted.table} in ${printable(deleted.index)}\n`;
}

export function formatIndexTables(tables: IndexTables): string {
  if (tables.tables.length === 0) return `no tables in ${printable(tables.index)} (${tables.backend})\n`;
  return rows(tables.tables.map((table) => [table.name, `${table.rows} rows`] as const));
}
