/**
 * Scoring predicted category paths against gold paths: accuracy per taxonomy level (the first n
 * names agree, over products whose gold path has at least n levels), exact-path accuracy, and
 * hierarchical precision / recall / F1 with the ancestor-set definition (Kiritchenko et al.):
 * each path stands for the set of its prefixes (the category and all its ancestors), and
 * hP = Σ|P∩G| / Σ|P|, hR = Σ|P∩G| / Σ|G| over products (micro-averaged), hF1 = 2·hP·hR / (hP + hR).
 * Reported overall and per top-level branch of the gold path. Every figure is a fraction 0..1.
 */

export interface HierarchicalScores {
  precision: number;
  recall: number;
  f1: number;
}

export interface EvaluationGroup {
  products: number;
  /** Level (1-based, as a string key) → accuracy. */
  accuracy_by_level: Record<string, number>;
  exact: number;
  hierarchical: HierarchicalScores;
}

export interface Evaluation extends EvaluationGroup {
  /** The same figures per top-level branch of the gold path. */
  by_branch: Record<string, EvaluationGroup>;
}

class Tally {
  products = 0;
  exact = 0;
  overlap = 0;
  predicted = 0;
  gold = 0;
  readonly levelHits: number[] = [];
  readonly levelTotals: number[] = [];

  add(predicted: readonly string[], gold: readonly string[]): void {
    this.products += 1;
    let common = 0;
    while (common < predicted.length && common < gold.length && predicted[common] === gold[common]) common += 1;
    // Prefix sets: paths share exactly their first `common` prefixes.
    this.overlap += common;
    this.predicted += predicted.length;
    this.gold += gold.length;
    if (common === gold.length && common === predicted.length) this.exact += 1;
    for (let level = 0; level < gold.length; level++) {
      this.levelTotals[level] = (this.levelTotals[level] ?? 0) + 1;
      if (level < common) this.levelHits[level] = (this.levelHits[level] ?? 0) + 1;
    }
  }

  result(): EvaluationGroup {
    const fraction = (part: number, whole: number): number => (whole === 0 ? 0 : part / whole);
    const precision = fraction(this.overlap, this.predicted);
    const recall = fraction(this.overlap, this.gold);
    const accuracy: Record<string, number> = {};
    this.levelTotals.forEach((total, level) => {
      accuracy[String(level + 1)] = fraction(this.levelHits[level] ?? 0, total);
    });
    return {
      products: this.products,
      accuracy_by_level: accuracy,
      exact: fraction(this.exact, this.products),
      hierarchical: { precision, recall, f1: precision + recall === 0 ? 0 : (2 * precision * recall) / (precision + recall) },
    };
  }
}

/** Accumulates (predicted path, gold path) pairs, one product at a time (memory: one tally per branch). */
export class Evaluator {
  readonly #all = new Tally();
  readonly #branches = new Map<string, Tally>();

  add(predicted: readonly string[], gold: readonly string[]): void {
    this.#all.add(predicted, gold);
    const branch = gold[0] ?? '';
    let tally = this.#branches.get(branch);
    if (tally === undefined) {
      tally = new Tally();
      this.#branches.set(branch, tally);
    }
    tally.add(predicted, gold);
  }

  result(): Evaluation {
    const byBranch: Record<string, EvaluationGroup> = {};
    for (const branch of [...this.#branches.keys()].sort()) byBranch[branch] = this.#branches.get(branch)?.result() ?? new Tally().result();
    return { ...this.#all.result(), by_branch: byBranch };
  }
}
