import type pg from 'pg';
import { HIT_COLUMNS, metadataColumn, RELATION_EXISTS, TABLE_LOCK } from './sql.js';
import { longStatement } from './pool.js';
import type { SearchHit } from '../store.js';
import { byScore, toHitRow } from '../shared/table-spec.js';

/**
 * The pgvector sink's full-text search (shared/text-search.ts), PostgreSQL's own: `to_tsvector('english',
 * text)` (English stemming and stop words) matched against the query's words ORed together, and
 * ranked by `ts_rank` with length normalization 1 (the rank divided by 1 + log of the chunk's
 * length). PostgreSQL has no BM25; on SciFact ts_rank scored nDCG@10 0.60 where ts_rank_cd
 * (cover density) scored 0.37, on the same rows (docs/benchmarks.md). Scores are not LanceDB's
 * BM25: only their order means something.
 *
 * The tsvector is stored, as a generated column `text_tsv` with a GIN index `T__text`, both added
 * by the first text search of a table (ALTER TABLE … ADD COLUMN … GENERATED ALWAYS AS … STORED:
 * tables written before text search existed are rewritten once, under the table's exclusive lock)
 * and kept current by PostgreSQL itself on every insert and update. Ranking reads the stored
 * vector: computing it from the text at query time ranked every matching row ten times slower
 * (965 against 86 ms per SciFact query on PGlite). A role that may not alter the table still
 * searches, by the expression and a sequential scan (the same rows, slower).
 */

/** The text search configuration of the column and of the query. */
const CONFIG = "'english'::regconfig";
/** The stored tsvector column. */
export const TEXT_VECTOR_COLUMN = 'text_tsv';
/** The same tsvector computed from the text, for a table this role could not add the column to. */
const COMPUTED = `to_tsvector(${CONFIG}, "text")`;

/** One query on the sink's pool (pgvector/store.ts's, with its error classing). */
export type PgRun = <R extends pg.QueryResultRow>(what: string, text: string, params?: unknown[]) => Promise<pg.QueryResult<R>>;
/** A transaction on the sink's pool. */
export type PgTransaction = (what: string, body: (client: pg.PoolClient) => Promise<void>) => Promise<void>;

/** Where a table's tsvector comes from: its stored column, or computed per row. */
export type TextVectorSource = 'stored' | 'computed';

/** The GIN index's name for table T (quoted; `__text` is one of the reserved table suffixes). */
export function textIndexName(table: string): string {
  return `"${table}__text"`;
}

function addTextColumn(chunks: string): string {
  return `ALTER TABLE ${chunks} ADD COLUMN IF NOT EXISTS ${TEXT_VECTOR_COLUMN} tsvector GENERATED ALWAYS AS (${COMPUTED}) STORED`;
}

function createTextIndex(table: string, chunks: string): string {
  return `CREATE INDEX IF NOT EXISTS ${textIndexName(table)} ON ${chunks} USING gin (${TEXT_VECTOR_COLUMN})`;
}

/**
 * `$1`: the query text, `$2`: the candidates, the filter's parameters from `$3` (`where` is the
 * filter as ` WHERE …` or ''). plainto_tsquery takes the text as words (no syntax, nothing to
 * escape) and ANDs them; its text form is turned into an OR of the same lexemes (a lexeme holds no
 * space, so ` & ` is only ever the operator), as a ranked search wants rows that share any word.
 */
export function searchTextSql(chunks: string, where: string, source: TextVectorSource, withMetadata = true): string {
  const vector = source === 'stored' ? TEXT_VECTOR_COLUMN : COMPUTED;
  return (
    `WITH q AS (SELECT replace(plainto_tsquery(${CONFIG}, $1)::text, ' & ', ' | ')::tsquery AS query) ` +
    `SELECT ${HIT_COLUMNS}, ${metadataColumn(withMetadata)}, ts_rank(${vector}, q.query, 1) AS text_score ` +
    `FROM (SELECT * FROM ${chunks}${where}) AS t CROSS JOIN q WHERE ${vector} @@ q.query ` +
    'ORDER BY text_score DESC, "id" LIMIT $2'
  );
}

/** PostgreSQL's "insufficient privilege" (not the table's owner). */
const INSUFFICIENT_PRIVILEGE = '42501';

function pgCode(error: unknown): string {
  const cause = error instanceof Error ? error.cause : undefined;
  return typeof cause === 'object' && cause !== null && 'code' in cause ? String(cause.code) : '';
}

/**
 * Adds the stored column and its GIN index when the table lacks them (one transaction, under the
 * lock prepare() takes, so two first searches do it once). Looked up first: ALTER TABLE and
 * CREATE INDEX lock the table even when there is nothing to do, which would make every search
 * wait for an ingest's open transaction.
 */
export async function ensureTextVector(run: PgRun, transaction: PgTransaction, table: string, chunks: string): Promise<TextVectorSource> {
  const found = await run<{ found: string | null }>('text index', RELATION_EXISTS, [textIndexName(table)]);
  if (found.rows[0]?.found != null) return 'stored';
  try {
    await transaction('text index', async (client) => {
      await client.query(TABLE_LOCK, [`shoal:${table}`]);
      // Both rewrite or read the whole table: minutes on a large one (no pool read timeout).
      await client.query(longStatement(addTextColumn(chunks)));
      await client.query(longStatement(createTextIndex(table, chunks)));
    });
    return 'stored';
  } catch (error) {
    if (pgCode(error) !== INSUFFICIENT_PRIVILEGE) throw error;
    return 'computed';
  }
}

/** The store's rows in rank order as hits (score: ts_rank, higher is better; equal scores by id). */
export function textHits(rows: readonly Record<string, unknown>[], k: number): SearchHit[] {
  return rows.map((raw) => ({ row: toHitRow(raw), score: Number(raw.text_score) })).sort(byScore).slice(0, k);
}
