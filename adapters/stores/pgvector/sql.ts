import type { PgVectorForm } from './vectors.js';
import { sparseToSql } from './vectors.js';
import type { ChunkRow, DocumentState, TableSpec } from '../store.js';
import { metadataText } from '../shared/row-metadata.js';
import { keptOptional } from '../shared/table-spec.js';

/**
 * The pgvector sink's SQL (pgvector/store.ts): the schema of a Shoal table T, `T` (chunks: a vector
 * column by output type, pgvector/vectors.ts, and a nullable `sparsevec`), `T__documents`
 * (per-source state) and `T__spec` (one row: the stored spec), and the statements that read and
 * write them with their parameters. Columns travel as one array parameter each, unnested
 * server-side, so a batch is one statement.
 */

/** The quoted names of one table's relations; the table name was checked by checkTableName. */
export interface PgTableNames {
  chunks: string;
  documents: string;
  spec: string;
  sourceIndex: string;
  hnsw: string;
}

export function pgTableNames(table: string): PgTableNames {
  const name = (suffix: string): string => `"${table}${suffix}"`;
  return { chunks: name(''), documents: name('__documents'), spec: name('__spec'), sourceIndex: name('__source'), hnsw: name('__hnsw') };
}

/** `$1`: a quoted relation name; `found` is null when it does not exist. */
export const RELATION_EXISTS = 'SELECT to_regclass($1)::text AS found';

/** `$1`: a lock key; held to the end of the transaction. */
export const TABLE_LOCK = 'SELECT pg_advisory_xact_lock(hashtext($1))';

export const CREATE_EXTENSION = 'CREATE EXTENSION IF NOT EXISTS vector';

export function createSpecTable(t: PgTableNames): string {
  return `CREATE TABLE IF NOT EXISTS ${t.spec} (name text PRIMARY KEY, spec jsonb NOT NULL)`;
}

export function selectSpec(t: PgTableNames): string {
  return `SELECT spec FROM ${t.spec} WHERE name = 'spec'`;
}

/** `$1`: the stored spec as JSON. */
export function insertSpec(t: PgTableNames): string {
  return `INSERT INTO ${t.spec} (name, spec) VALUES ('spec', $1)`;
}

export function createStateTable(t: PgTableNames): string {
  return (
    `CREATE TABLE IF NOT EXISTS ${t.documents} (source text PRIMARY KEY, document_id text NOT NULL, settings text NOT NULL, ` +
    'chunks integer NOT NULL, pages integer NOT NULL, ingested_at text NOT NULL)'
  );
}

export function createChunksTable(t: PgTableNames, form: PgVectorForm): string {
  return (
    `CREATE TABLE IF NOT EXISTS ${t.chunks} (id text PRIMARY KEY, document_id text NOT NULL, source text NOT NULL, page integer NOT NULL, ` +
    'chunk integer NOT NULL, text text NOT NULL, start integer NOT NULL, "end" integer NOT NULL, heading text, settings text NOT NULL, ' +
    `entities text, labels text, ingested_at text NOT NULL, vector ${form.column} NOT NULL, sparse sparsevec, metadata jsonb)`
  );
}

/**
 * The document metadata column (jsonb): made with every new table, added in place to a table made
 * before metadata on its first write (a nullable column is added without rewriting the table).
 */
export function addMetadataColumn(t: PgTableNames): string {
  return `ALTER TABLE ${t.chunks} ADD COLUMN IF NOT EXISTS metadata jsonb`;
}

/** `$1`: the chunk table's unquoted name; a row when it has the metadata column. */
export const METADATA_COLUMN_EXISTS = "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = 'metadata'";

export function createSourceIndex(t: PgTableNames): string {
  return `CREATE INDEX IF NOT EXISTS ${t.sourceIndex} ON ${t.chunks} (source)`;
}

/** HNSW build parameters (pgvector's `m`, `ef_construction`); whole numbers checked by the caller. */
export interface HnswBuild {
  m: number;
  efConstruction: number;
}

export function createHnswIndex(t: PgTableNames, form: PgVectorForm, build: HnswBuild): string {
  return `CREATE INDEX IF NOT EXISTS ${t.hnsw} ON ${t.chunks} USING hnsw (vector ${form.ops}) WITH (m = ${Math.trunc(build.m)}, ef_construction = ${Math.trunc(build.efConstruction)})`;
}

/** `$1`: sources. */
export function selectStates(t: PgTableNames): string {
  return `SELECT * FROM ${t.documents} WHERE source = ANY($1::text[])`;
}

/** `$1`: a source prefix. */
export function selectStatesUnder(t: PgTableNames): string {
  return `SELECT * FROM ${t.documents} WHERE starts_with(source, $1)`;
}

/** `$1`: sources; the same statement for the chunks (`t.chunks`) and the states (`t.documents`). */
export function deleteSources(relation: string): string {
  return `DELETE FROM ${relation} WHERE source = ANY($1::text[])`;
}

/** Deletes the older versions of these sources' rows: another content hash or other settings. */
export function deleteStale(t: PgTableNames, states: readonly DocumentState[]): { text: string; params: unknown[] } {
  return {
    text:
      `DELETE FROM ${t.chunks} AS t USING unnest($1::text[], $2::text[], $3::text[]) AS s(source, document_id, settings) ` +
      'WHERE t.source = s.source AND (t.document_id <> s.document_id OR t.settings <> s.settings)',
    params: [states.map((s) => s.source), states.map((s) => s.document_id), states.map((s) => s.settings)],
  };
}

export function upsertStates(t: PgTableNames, states: readonly DocumentState[]): { text: string; params: unknown[] } {
  return {
    text:
      `INSERT INTO ${t.documents} (source, document_id, settings, chunks, pages, ingested_at) ` +
      'SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[], $6::text[]) ' +
      'ON CONFLICT (source) DO UPDATE SET document_id = EXCLUDED.document_id, settings = EXCLUDED.settings, chunks = EXCLUDED.chunks, pages = EXCLUDED.pages, ingested_at = EXCLUDED.ingested_at',
    params: [states.map((s) => s.source), states.map((s) => s.document_id), states.map((s) => s.settings), states.map((s) => s.chunks), states.map((s) => s.pages), states.map((s) => s.ingested_at)],
  };
}

/** One statement for a batch of rows, inserted or replaced by id; optional columns the spec lacks are written null. */
export function upsertChunks(t: PgTableNames, form: PgVectorForm, batch: readonly ChunkRow[], spec: TableSpec | null): { text: string; params: unknown[] } {
  const optional = spec?.optionalColumns ?? [];
  const kept = batch.map((row) => keptOptional(row, optional));
  const column = <T>(pick: (row: ChunkRow) => T): T[] => batch.map(pick);
  return {
    text:
      `INSERT INTO ${t.chunks} (id, document_id, source, page, chunk, text, start, "end", heading, settings, entities, labels, ingested_at, vector, sparse, metadata) ` +
      'SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[], $6::text[], $7::int[], $8::int[], $9::text[], $10::text[], ' +
      `$11::text[], $12::text[], $13::text[], $14::${form.cast}[], $15::sparsevec[], $16::jsonb[]) ` +
      'ON CONFLICT (id) DO UPDATE SET document_id = EXCLUDED.document_id, source = EXCLUDED.source, page = EXCLUDED.page, chunk = EXCLUDED.chunk, ' +
      'text = EXCLUDED.text, start = EXCLUDED.start, "end" = EXCLUDED."end", heading = EXCLUDED.heading, settings = EXCLUDED.settings, ' +
      'entities = EXCLUDED.entities, labels = EXCLUDED.labels, ingested_at = EXCLUDED.ingested_at, vector = EXCLUDED.vector, sparse = EXCLUDED.sparse, metadata = EXCLUDED.metadata',
    params: [
      column((r) => r.id), column((r) => r.document_id), column((r) => r.source), column((r) => r.page), column((r) => r.chunk),
      column((r) => r.text), column((r) => r.start), column((r) => r.end), column((r) => r.heading), column((r) => r.settings),
      kept.map((k) => k.entities), kept.map((k) => k.labels), column((r) => r.ingested_at),
      column((r) => form.toSql(r.vector)),
      column((r) => (r.sparse == null ? null : sparseToSql(r.sparse))),
      column((r) => metadataText(r.metadata)),
    ],
  };
}

/** The metadata columns of a hit (the vectors are read separately, as text); pgvector/text.ts reads the same. */
export const HIT_COLUMNS = '"id", "document_id", "source", "page", "chunk", "text", "start", "end", "heading", "settings", "entities", "labels", "ingested_at"';

/** The metadata column of a hit; null for a table made before metadata and not written since. */
export function metadataColumn(withMetadata: boolean): string {
  return withMetadata ? '"metadata"' : 'NULL::jsonb AS "metadata"';
}

/** `$1`: the filter's first parameter and on. */
export function countRows(t: PgTableNames, where: string): string {
  return `SELECT count(*) AS n FROM ${t.chunks}${where}`;
}

/** `$1`: the query vector, `$2`: the candidates, the filter's parameters from `$3`; `vector_text` is the stored vector. */
export function searchDense(t: PgTableNames, form: PgVectorForm, where: string, withMetadata = true): string {
  return `SELECT ${HIT_COLUMNS}, ${metadataColumn(withMetadata)}, vector::text AS vector_text FROM ${t.chunks}${where} ORDER BY vector ${form.op} $1::${form.cast} LIMIT $2`;
}

/**
 * `$1`: the query `sparsevec`, `$2`: the candidates, the filter's parameters from `$3`. `<#>` is
 * the negative inner product; rows without a sparse vector give NULL, which sorts last.
 */
export function searchSparse(t: PgTableNames, where: string, withMetadata = true): string {
  return `SELECT ${HIT_COLUMNS}, ${metadataColumn(withMetadata)}, sparse::text AS sparse FROM ${t.chunks}${where} ORDER BY sparse <#> $1::sparsevec LIMIT $2`;
}
