import type pg from 'pg';
import { HIT_COLUMNS, RELATION_EXISTS } from './pgvector-sql.js';
import type { SearchHit } from './sink.js';
import { byScore, toHitRow } from './table-spec.js';

/**
 * The pgvector sink's full-text search (text-search.ts), PostgreSQL's own: `to_tsvector('english',
 * text)` (English stemming and stop words) matched against the query's words ORed together, and
 * ranked by `ts_rank_cd` with length normalization 1 (the rank divided by 1 + log of the chunk's
 * length). PostgreSQL has no BM25; cover density is its nearest ranking, so scores are not
 * LanceDB's and only their order means something.
 *
 * The tsvector is computed, not stored: a GIN index on the expression (`T__text`) answers the
 * match, made on the first text search of a table (CREATE INDEX IF NOT EXISTS; no column is added,
 * so tables written before text search existed need no rewrite) and kept current by PostgreSQL
 * itself on every insert, update and delete. A role that may not create indexes still searches,
 * by a sequential scan (the same rows, slower).
 */

/** The text search configuration of both the index expression and the query (they must be equal for the index to serve). */
const CONFIG = "'english'::regconfig";
const DOCUMENT = `to_tsvector(${CONFIG}, "text")`;

/** One query on the sink's pool (pgvector.ts's, with its error classing). */
export type PgRun = <R extends pg.QueryResultRow>(what: string, text: string, params?: unknown[]) => Promise<pg.QueryResult<R>>;

/** The GIN index's name for table T (quoted; `__text` is one of the reserved table suffixes). */
export function textIndexName(table: string): string {
  return `"${table}__text"`;
}

export function createTextIndex(table: string, chunks: string): string {
  return `CREATE INDEX IF NOT EXISTS ${textIndexName(table)} ON ${chunks} USING gin (${DOCUMENT})`;
}

/**
 * `$1`: the query text, `$2`: the candidates, the filter's parameters from `$3` (`where` is the
 * filter as ` WHERE …` or ''). plainto_tsquery takes the text as words (no syntax, nothing to
 * escape) and ANDs them; its text form is turned into an OR of the same lexemes (a lexeme holds no
 * space, so ` & ` is only ever the operator), as a ranked search wants rows that share any word.
 */
export function searchTextSql(chunks: string, where: string): string {
  return (
    `WITH q AS (SELECT replace(plainto_tsquery(${CONFIG}, $1)::text, ' & ', ' | ')::tsquery AS query) ` +
    `SELECT ${HIT_COLUMNS}, ts_rank_cd(${DOCUMENT}, q.query, 1) AS text_score ` +
    `FROM (SELECT * FROM ${chunks}${where}) AS t CROSS JOIN q WHERE ${DOCUMENT} @@ q.query ` +
    'ORDER BY text_score DESC, "id" LIMIT $2'
  );
}

/** PostgreSQL's "insufficient privilege" (not the table's owner, no CREATE right). */
const INSUFFICIENT_PRIVILEGE = '42501';

/**
 * Makes the GIN index, or leaves the table unindexed when this role may not (then matched by a
 * scan). Looked up first: CREATE INDEX IF NOT EXISTS takes the table's SHARE lock before it finds
 * the index made, which would make every search wait for an ingest's open transaction.
 */
export async function ensureTextIndex(run: PgRun, table: string, chunks: string): Promise<void> {
  const found = await run<{ found: string | null }>('text index', RELATION_EXISTS, [textIndexName(table)]);
  if (found.rows[0]?.found != null) return;
  try {
    await run('text index', createTextIndex(table, chunks));
  } catch (error) {
    const cause = error instanceof Error ? error.cause : undefined;
    const code = typeof cause === 'object' && cause !== null && 'code' in cause ? String(cause.code) : '';
    if (code !== INSUFFICIENT_PRIVILEGE) throw error;
  }
}

/** The store's rows in rank order as hits (score: ts_rank_cd, higher is better; equal scores by id). */
export function textHits(rows: readonly Record<string, unknown>[], k: number): SearchHit[] {
  return rows.map((raw) => ({ row: toHitRow(raw), score: Number(raw.text_score) })).sort(byScore).slice(0, k);
}
