import { createRequire } from 'node:module';
import * as lancedb from '@lancedb/lancedb';
import { Field, Utf8, type Schema, type Table as ArrowTable } from 'apache-arrow';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';

/**
 * The `metadata` column of a LanceDB chunk table: Lance's JSON type, so filters read fields with
 * Lance's JSON functions (lancedb/filter.ts). A table is created with a UTF-8 column marked
 * `arrow.json`, which Lance stores as its binary JSON (`lance.json`); rows are written with the
 * same marking. LanceDB's JavaScript client cannot build rows for that binary type from plain
 * objects (it rebuilds them from the table's schema, whose `LargeBinary` it does not know), so a
 * table with the column is written from an Arrow table built here. LanceDB reads the column back
 * as JSON text.
 *
 * A table made before metadata has no such column and is left as it is: it opens and searches as
 * before, its new rows are written without metadata, and a `metadata.<field>` filter is refused
 * with the advice to re-index (Lance's add-column gives a binary column, not a JSON one, so the
 * column cannot be added in place; docs/storage.md).
 */

export const METADATA_COLUMN = 'metadata';
const JSON_EXTENSION = new Map([['ARROW:extension:name', 'arrow.json']]);

/** The column as a new table declares it. */
export function metadataField(): Field {
  return new Field(METADATA_COLUMN, new Utf8(), true, JSON_EXTENSION);
}

export function hasMetadataColumn(schema: Schema): boolean {
  return schema.fields.some((field) => field.name === METADATA_COLUMN);
}

/**
 * LanceDB's own copy of apache-arrow (it is loaded with require): Arrow tables it is handed must be
 * made of its classes, which `instanceof` checks; this module's ESM import is another copy.
 */
const arrow = createRequire(import.meta.url)('apache-arrow') as typeof import('apache-arrow');

/**
 * Rows (plain objects, `metadata` already JSON text or null) as an Arrow table of the chunk table's
 * schema, its metadata column marked as JSON: built by LanceDB's own conversion with the column as
 * plain text, then given the JSON marking.
 */
export function rowsAsArrow(rows: readonly Record<string, unknown>[], tableSchema: Schema): ArrowTable {
  const fields = tableSchema.fields.map((field) => (field.name === METADATA_COLUMN ? new arrow.Field(METADATA_COLUMN, new arrow.Utf8(), true) : field));
  const plain = new arrow.Schema(fields, tableSchema.metadata);
  const marked = new arrow.Schema(fields.map((field) => (field.name === METADATA_COLUMN ? new arrow.Field(METADATA_COLUMN, new arrow.Utf8(), true, JSON_EXTENSION) : field)), tableSchema.metadata);
  const table = lancedb.makeArrowTable([...rows], { schema: plain });
  const batches = table.batches.map((batch) => new arrow.RecordBatch(marked, arrow.makeData({ type: new arrow.Struct(marked.fields), length: batch.numRows, nullCount: 0, children: batch.data.children })));
  return new arrow.Table(marked, batches) as unknown as ArrowTable;
}

/** A metadata filter on a table made before metadata: refused, with what to do. */
export function noMetadataColumn(where: string): ShoalError {
  return new ShoalError(
    ErrorCode.INVALID_INPUT,
    `filter: ${where} was made before Shoal stored document metadata, so it has no metadata to filter on; re-index into a new table or folder (shoal ingest --index NEW ...) to store and filter metadata`,
    { details: { field: 'filter' } },
  );
}
