import type { Taxonomy } from '../../adapters/taxonomy/index.js';

/**
 * Hierarchy consistency: instead of taking the single best candidate (which may sit alone in a
 * branch that the other candidates disagree with), each level is decided top-down by a vote of
 * the candidates: the branch whose candidates' scores add up to the most wins, then its child
 * branches vote, and so on until the branch is a candidate with no candidate below it. Ties go
 * to the branch holding the higher single score, then to the lower index (stable).
 */

export interface Scored {
  index: number;
  score: number;
}

/** Index of the category chosen by the vote among `candidates` (at least one). */
export function hierarchyChoice(taxonomy: Taxonomy, candidates: readonly Scored[]): number {
  // Each candidate votes for itself and every ancestor: its score (negative scores count 0).
  const sum = new Map<number, number>();
  const best = new Map<number, number>();
  for (const { index, score } of candidates) {
    for (let at = index; at !== -1; at = taxonomy.categories[at]?.parent ?? -1) {
      sum.set(at, (sum.get(at) ?? 0) + Math.max(score, 0));
      best.set(at, Math.max(best.get(at) ?? Number.NEGATIVE_INFINITY, score));
    }
  }
  const pick = (options: readonly number[]): number | null => {
    let chosen: number | null = null;
    for (const option of options) {
      if (!sum.has(option)) continue;
      if (chosen === null) {
        chosen = option;
        continue;
      }
      const a = sum.get(option) ?? 0;
      const b = sum.get(chosen) ?? 0;
      if (a > b || (a === b && (best.get(option) ?? 0) > (best.get(chosen) ?? 0))) chosen = option;
    }
    return chosen;
  };
  let node = pick(taxonomy.roots);
  if (node === null) return candidates[0]?.index ?? 0;
  for (;;) {
    const next = pick(taxonomy.children[node] ?? []);
    if (next === null) return node;
    node = next;
  }
}
