import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { SearchHit, SearchOptions, Store } from '../store.js';

/**
 * Full-text search (`shoal search --mode text`, and the text leg of hybrid search) across the
 * sinks: which backends rank chunks by their text, the one refusal for the others, and the checks
 * every backend applies to a text query. The per-store code is lancedb/text.ts and pgvector/text.ts.
 *
 * Chroma and Qdrant are refused rather than approximated: Chroma's `where_document: {$contains}`
 * and Qdrant's full-text payload index (`match: {text}`) filter rows, they do not rank them, so a
 * "text" search there would be a dense search among the rows that contain the words, which is not
 * what `--mode text` promises (a lexical ranking that works whatever the encoder).
 */

/** The backends whose sinks implement `searchText`, as said in the refusal. */
export const TEXT_SEARCH_BACKENDS: readonly string[] = Object.freeze(['LanceDB (the default, a folder)', 'pgvector (postgres://)']);

/** Longest text query a store is handed (the HTTP body allows 4,096 characters; the CLI the same). */
export const MAX_TEXT_QUERY_CHARS = 4_096;

/** UNSUPPORTED_OPERATION for a store that cannot rank rows by their text. */
export function noTextSearch(): ShoalError {
  return new ShoalError(
    ErrorCode.UNSUPPORTED_OPERATION,
    `mode text needs a store that ranks chunks by their text, ${TEXT_SEARCH_BACKENDS.join(' or ')}, and this index's cannot (Chroma's $contains and Qdrant's full-text match filter rows, they do not rank them; the file sinks keep no text index)`,
    { details: { field: 'mode', supported: [...TEXT_SEARCH_BACKENDS] } },
  );
}

/** The sink's full-text search, or UNSUPPORTED_OPERATION when its backend has none (wrappers forward through this). */
export function searchTextOf(sink: Store, query: string, options: SearchOptions): Promise<SearchHit[]> {
  if (sink.searchText === undefined) return Promise.reject(noTextSearch());
  return sink.searchText(query, options);
}

/** INVALID_INPUT unless the query has some text within MAX_TEXT_QUERY_CHARS and k is in range (the bounds of the other searches). */
export function checkTextQuery(query: string, k: number): void {
  if (query.trim() === '') throw new ShoalError(ErrorCode.INVALID_INPUT, 'the query is empty');
  if (query.length > MAX_TEXT_QUERY_CHARS) throw new ShoalError(ErrorCode.INVALID_INPUT, `the text query has ${query.length} characters, at most ${MAX_TEXT_QUERY_CHARS}`);
  if (!Number.isInteger(k) || k < 1 || k > 10_000) throw new ShoalError(ErrorCode.INVALID_INPUT, `k must be an integer from 1 to 10000 (got ${k})`);
}
