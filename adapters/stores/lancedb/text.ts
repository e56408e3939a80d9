import * as lancedb from '@lancedb/lancedb';
import { z } from 'zod';
import { hitColumns } from './vectors.js';
import type { SearchHit, SearchOptions, TableSpec } from '../store.js';
import { byScore, candidateCount, toHitRow } from '../shared/table-spec.js';
import { checkTextQuery } from '../shared/text-search.js';

/**
 * The LanceDB sink's full-text search (shared/text-search.ts): LanceDB's own inverted index on the
 * `text` column, ranked by BM25.
 *
 * When the index is built and how it is kept current:
 * - built on demand, by the first text (or hybrid) search of a table that has none: ingest does
 *   not pay for it, and indexes written before text search existed need nothing done to them
 *   (about a second per 10k chunks; measured in docs/benchmarks.md);
 * - LanceDB does not search rows appended after the index was built (they are "unindexed" until
 *   the table is optimized; checked against 0.31), so the sink's `optimize()`, which ingest calls
 *   after every run, folds new rows into an existing index, and each text search first checks
 *   the index's unindexed-row count and folds them in itself when a writer did not (during a run,
 *   an interrupted run, another process), one fold-in at a time per table. Deleted and replaced
 *   rows are never returned: LanceDB drops them from the results at once.
 * The query is a bag of words (MatchQuery, OR): no query syntax, so a user's quotes, colons and
 * parentheses are plain text, never a parse error.
 */

/** LanceDB's name for an index on the `text` column (`<column>_idx`). */
export const TEXT_INDEX_NAME = 'text_idx';

/**
 * English stemming and stop words, lower case and ASCII folding (the usual BM25 analyzer); no
 * positions: phrase queries are not offered, and positions make the index several times larger.
 */
const TEXT_INDEX_OPTIONS = Object.freeze({ baseTokenizer: 'simple', language: 'English', stem: true, removeStopWords: true, lowercase: true, asciiFolding: true, withPosition: false } as const);

const Scored = z.object({ _score: z.number() });

/**
 * One build or fold-in at a time per table folder in this process: the gateway opens a sink per
 * request, so concurrent first searches (or searches during an ingest, each finding unindexed
 * rows) would each start one. Entries are removed when they settle.
 */
const inFlight = new Map<string, Promise<void>>();

function once(key: string, work: () => Promise<void>): Promise<void> {
  const running = inFlight.get(key);
  if (running !== undefined) return running;
  const next = work().finally(() => inFlight.delete(key));
  inFlight.set(key, next);
  return next;
}

/**
 * Before a text search: builds the text index when the table has none, and folds in rows added
 * since. A failed fold-in (a conflict with a writer's commit, say) does not fail the search,
 * which then answers from the rows already indexed; the next search, or the run's optimize(),
 * folds them in.
 */
export function ensureTextIndex(chunks: lancedb.Table, key: string): Promise<void> {
  return once(key, async () => {
    const stats = await chunks.indexStats(TEXT_INDEX_NAME);
    if (stats === undefined) {
      await buildTextIndex(chunks);
      return;
    }
    if (stats.numUnindexedRows > 0) await chunks.optimize().catch(() => undefined);
  });
}

/** After a run: indexes the new rows of an existing text index; a table without one is left alone (built on first text search). */
export function refreshTextIndex(chunks: lancedb.Table, key: string): Promise<void> {
  return once(key, async () => {
    const stats = await chunks.indexStats(TEXT_INDEX_NAME);
    if (stats !== undefined && stats.numUnindexedRows > 0) await chunks.optimize();
  });
}

async function buildTextIndex(chunks: lancedb.Table): Promise<void> {
  try {
    await chunks.createIndex('text', { config: lancedb.Index.fts(TEXT_INDEX_OPTIONS), replace: false });
  } catch (error) {
    // Another process built it meanwhile (its commit won): that index serves as well.
    if ((await chunks.indexStats(TEXT_INDEX_NAME)) === undefined) throw error;
  }
}

/** The k rows with the best BM25 score for the query's words (filter pushed down), best first, equal scores by id. */
export async function searchTextColumn(chunks: lancedb.Table, key: string, spec: TableSpec, query: string, options: SearchOptions, extraColumns: readonly string[] = []): Promise<SearchHit[]> {
  checkTextQuery(query, options.k);
  await ensureTextIndex(chunks, key);
  let search = chunks.query().fullTextSearch(new lancedb.MatchQuery(query, 'text')).select([...hitColumns(spec, extraColumns), '_score']).limit(candidateCount(options.k));
  if (options.filter !== undefined) search = search.where(options.filter);
  const rows: unknown[] = await search.toArray();
  return rows.map((raw) => ({ row: toHitRow(raw), score: Scored.parse(raw)._score })).sort(byScore).slice(0, options.k);
}
