import { describe, expect, it } from 'vitest';
import { parseTaxonomy } from '../../../../adapters/taxonomy/index.js';
import { Evaluator, goldPath, hierarchyChoice, packRows, topK } from '../../../../pipelines/classify/index.js';

/** The scorer on a case computed by hand, gold label resolution, the hierarchy vote and the packed search. */

describe('Evaluator', () => {
  it('gives the per-level, exact and hierarchical figures computed by hand', () => {
    const evaluator = new Evaluator();
    evaluator.add(['A', 'B', 'C'], ['A', 'B', 'C']); // common 3, |P| 3, |G| 3, exact
    evaluator.add(['A', 'B', 'D'], ['A', 'B', 'C']); // common 2, |P| 3, |G| 3
    evaluator.add(['X', 'Y', 'Z'], ['A', 'E']); // common 0, |P| 3, |G| 2
    evaluator.add(['X', 'Y'], ['X']); // common 1, |P| 2, |G| 1
    const result = evaluator.result();
    // L1: 3 of 4; L2: products 1-3 have a level 2, 2 right; L3: products 1-2, 1 right.
    expect(result.products).toBe(4);
    expect(result.accuracy_by_level).toEqual({ '1': 0.75, '2': 2 / 3, '3': 0.5 });
    expect(result.exact).toBe(0.25);
    // hP = 6/11, hR = 6/9, hF1 = 2·(6/11)(2/3)/((6/11)+(2/3)) = 24/40.
    expect(result.hierarchical.precision).toBeCloseTo(6 / 11, 12);
    expect(result.hierarchical.recall).toBeCloseTo(2 / 3, 12);
    expect(result.hierarchical.f1).toBeCloseTo(0.6, 12);
    // Branch A (products 1-3): hP 5/9, hR 5/8, F1 10/17; branch X (product 4): hP 1/2, hR 1, F1 2/3.
    expect(Object.keys(result.by_branch)).toEqual(['A', 'X']);
    expect(result.by_branch.A?.products).toBe(3);
    expect(result.by_branch.A?.accuracy_by_level).toEqual({ '1': 2 / 3, '2': 2 / 3, '3': 0.5 });
    expect(result.by_branch.A?.exact).toBeCloseTo(1 / 3, 12);
    expect(result.by_branch.A?.hierarchical.f1).toBeCloseTo(10 / 17, 12);
    expect(result.by_branch.X?.hierarchical).toEqual({ precision: 0.5, recall: 1, f1: 2 / 3 });
  });

  it('resolves gold labels by id, by path, and by the longest known prefix of a scraped tree', () => {
    const taxonomy = parseTaxonomy('10 - Home\n11 - Home > Curtains\n12 - Home > Curtains > Door Curtains');
    expect(goldPath(taxonomy, '12')).toEqual(['Home', 'Curtains', 'Door Curtains']);
    expect(goldPath(taxonomy, 'Home > Curtains')).toEqual(['Home', 'Curtains']);
    expect(goldPath(taxonomy, 'Home >> Curtains >> Elegance Polyester Eyelet Do...')).toEqual(['Home', 'Curtains']);
    expect(goldPath(taxonomy, 'Garden >> Tools')).toEqual(['Garden', 'Tools']);
  });
});

describe('hierarchyChoice', () => {
  const taxonomy = parseTaxonomy('A\nA > A1\nA > A2\nB\nB > B1');
  const at = (id: string): number => taxonomy.byId.get(id) ?? -1;

  it('follows the branch the candidates vote for, not the single best candidate', () => {
    const candidates = [
      { index: at('B > B1'), score: 0.9 },
      { index: at('A > A1'), score: 0.6 },
      { index: at('A > A2'), score: 0.5 },
      { index: at('A'), score: 0.2 },
    ];
    // A: 0.6 + 0.5 + 0.2 = 1.3 beats B: 0.9; then A1 (0.6) beats A2 (0.5).
    expect(hierarchyChoice(taxonomy, candidates)).toBe(at('A > A1'));
    expect(hierarchyChoice(taxonomy, [{ index: at('B > B1'), score: 0.9 }, { index: at('A'), score: 0.8 }])).toBe(at('B > B1'));
    // A branch with no candidate below it stops at the candidate itself.
    expect(hierarchyChoice(taxonomy, [{ index: at('A'), score: 0.7 }, { index: at('B > B1'), score: 0.3 }])).toBe(at('A'));
  });
});

describe('packed top-k search', () => {
  it('finds the same rows and scores as a brute-force cosine over plain arrays', () => {
    let seed = 7;
    const random = (): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed / 2_147_483_648 - 0.5;
    };
    const dim = 37;
    const rows = Array.from({ length: 500 }, () => Array.from({ length: dim }, random));
    const queries = Array.from({ length: 6 }, () => Array.from({ length: dim }, random));
    const matrix = packRows(rows, dim);
    const packed = packRows(queries, dim);
    const found = topK(matrix, packed.data, queries.length, 5);
    const norm = (v: number[]): number => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
    queries.forEach((query, q) => {
      const expected = rows
        .map((row, index) => ({ index, score: row.reduce((s, x, i) => s + x * (query[i] ?? 0), 0) / (norm(row) * norm(query)) }))
        .sort((a, b) => b.score - a.score)
        .slice(0, 5);
      expect([...found.indices.slice(q * 5, q * 5 + 5)]).toEqual(expected.map((e) => e.index));
      expected.forEach((e, i) => expect(found.scores[q * 5 + i]).toBeCloseTo(e.score, 5));
    });
    // Fewer rows than k: the rest is -1.
    const small = topK(packRows(rows.slice(0, 2), dim), packed.data, 1, 4);
    expect([...small.indices]).toEqual([expect.any(Number), expect.any(Number), -1, -1]);
  });
});
