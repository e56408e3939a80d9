import type { CallOptions, Engine } from '../../adapters/protocol/engine.js';
import type { SearchHit, Store } from '../../adapters/stores/store.js';
import { hitLine, indexSpec, rankedChunks, type HitLine, type SearchQuery } from './search.js';

/**
 * `shoal search --group-by document` (`group_by: "document"`): the ranked chunks of a search,
 * grouped per source document. A document scores as its best chunk (the chunk lists are ranked
 * already, so the first chunk of a document seen is its best), documents are ordered by that
 * score (equal scores by the best chunk's rank), and each lists its best chunks in rank order,
 * at most CHUNKS_PER_DOCUMENT. `k` counts documents: search.ts asks for a pool of chunks wide
 * enough (groupPool), and widens it while fewer than k documents came out of a full pool.
 */

/** Chunks listed under each document. */
export const CHUNKS_PER_DOCUMENT = 3;
/** Chunks ranked per document asked for, and the least pool (a few documents with many matching chunks would fill a narrow one). */
export const GROUP_POOL_PER_DOCUMENT = 5;
const MIN_POOL = 50;
/** Widest pool a grouped search ranks (the stores' k limit). */
export const MAX_GROUP_POOL = 10_000;

/** Chunks first ranked for k documents: max(5k, 50), at most MAX_GROUP_POOL. */
export function groupPool(k: number): number {
  return Math.min(Math.max(k * GROUP_POOL_PER_DOCUMENT, MIN_POOL), MAX_GROUP_POOL);
}

/** The next, wider pool (×4) when the last one gave fewer documents than asked for. */
export function widerPool(pool: number): number {
  return Math.min(pool * 4, MAX_GROUP_POOL);
}

export interface DocumentGroup {
  score: number;
  document_id: string;
  source: string;
  hits: SearchHit[];
}

/** What `shoal search --group-by document` prints and POST /v1/search answers per document. */
export interface DocumentLine {
  rank: number;
  score: number;
  document_id: string;
  source: string;
  /** The document's best chunks, each ranked among all the chunks of the search (rank from 1). */
  hits: HitLine[];
}

/** The first k documents of ranked chunks (a document is its source: one source, one document). */
export function groupByDocument(ranked: readonly SearchHit[], k: number): DocumentGroup[] {
  const groups = new Map<string, DocumentGroup>();
  for (const hit of ranked) {
    const group = groups.get(hit.row.source);
    if (group === undefined) groups.set(hit.row.source, { score: hit.score, document_id: hit.row.document_id, source: hit.row.source, hits: [hit] });
    else if (group.hits.length < CHUNKS_PER_DOCUMENT) group.hits.push(hit);
  }
  // A Map keeps insertion order, documents by their best chunk's rank; sorted by score as well
  // (a stable sort, so equal scores keep that order) for a list that is not in score order.
  return [...groups.values()].sort((a, b) => b.score - a.score).slice(0, k);
}

/**
 * The k best documents for the query: chunks ranked as searchIndex ranks them, from a pool of
 * groupPool(k), widened while fewer than k documents came out of a full pool. A reranked search
 * ranks one pool (each widening would rescore every candidate again).
 */
export async function searchDocuments(engine: Engine, sink: Store, query: SearchQuery, call: CallOptions = {}): Promise<DocumentLine[]> {
  const spec = await indexSpec(sink, query);
  let pool = groupPool(query.k);
  for (;;) {
    const ranked = await rankedChunks(engine, sink, spec, query, pool, call);
    const groups = groupByDocument(ranked, query.k);
    if (groups.length >= query.k || ranked.length < pool || pool >= MAX_GROUP_POOL || query.rerank !== undefined) return documentLines(ranked, groups);
    pool = widerPool(pool);
  }
}

/** The printed form of grouped hits: documents ranked from 1, each chunk with its rank among all the search's chunks. */
export function documentLines(ranked: readonly SearchHit[], groups: readonly DocumentGroup[]): DocumentLine[] {
  const rankOf = new Map(ranked.map((hit, index) => [hit.row.id, index + 1]));
  return groups.map((group, index) => ({
    rank: index + 1,
    score: Math.round(group.score * 1e6) / 1e6,
    document_id: group.document_id,
    source: group.source,
    hits: group.hits.map((hit) => hitLine(rankOf.get(hit.row.id) ?? 0, hit)),
  }));
}
