import type { SearchHit } from '../../adapters/stores/store.js';

/**
 * Reciprocal rank fusion (Cormack, Clarke and Büttcher, SIGIR 2009), how `shoal search` merges the
 * rankings of a hybrid search (dense, sparse, full-text: every one the index has): a row scores
 * Σ 1 / (RRF_K + rank) over the lists it appears in (rank from 1). Ranks, not scores, are fused,
 * so cosine similarities, SPLADE dot products and BM25 scores (different scales) need no
 * calibration; every list weighs the same. Equal fused scores are ordered by
 * id, so the same lists always give the same order.
 */

/** The constant of the paper, also Elasticsearch's, OpenSearch's and Qdrant's default. */
export const RRF_K = 60;

/** Rows taken from each list before fusing: a row ranked below this in both lists cannot reach the top. */
export function fusionDepth(wanted: number): number {
  return Math.max(wanted, 100);
}

export function reciprocalRankFusion(lists: readonly (readonly SearchHit[])[], k: number, constant = RRF_K): SearchHit[] {
  const fused = new Map<string, SearchHit>();
  for (const list of lists) {
    list.forEach((hit, index) => {
      const score = 1 / (constant + index + 1);
      const seen = fused.get(hit.row.id);
      fused.set(hit.row.id, { row: seen?.row ?? hit.row, score: (seen?.score ?? 0) + score });
    });
  }
  return [...fused.values()].sort((a, b) => b.score - a.score || (a.row.id < b.row.id ? -1 : a.row.id > b.row.id ? 1 : 0)).slice(0, k);
}
