import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { parseCatalog } from '../../pipelines/inference/catalog.js';
import { conformanceSuite, type ConformanceCase, type ConformanceModel } from '../helpers/conformance.js';

/**
 * Cross-encoder reranking through the public score API: sigmoid(logit) scores from the kit,
 * results sorted by score with each item's request `index`, raw logits through a catalog
 * override of the activation, and encode refused. Pair token ids are checked in
 * pair-tokenization.test.ts.
 */

const PairInputs = z.looseObject({ pairs: z.array(z.tuple([z.string(), z.string()])) });
const Expected = z.looseObject({ logits: z.array(z.number()), scores: z.array(z.number()) });

interface QueryGroup {
  query: string;
  passages: string[];
  /** Position of each passage's pair in the case. */
  pairIndex: number[];
}

/** engine.score takes one query and many items: the case's pairs grouped by query, in order. */
function groupByQuery(kase: ConformanceCase): QueryGroup[] {
  const groups = new Map<string, QueryGroup>();
  PairInputs.parse(kase.inputs).pairs.forEach(([query, passage], i) => {
    let group = groups.get(query);
    if (group === undefined) {
      group = { query, passages: [], pairIndex: [] };
      groups.set(query, group);
    }
    group.passages.push(passage);
    group.pairIndex.push(i);
  });
  return [...groups.values()];
}

function crossEncoderSuite(model: ConformanceModel): void {
  let engine: InferenceEngine;
  const LOGITS = 'ce-logits';
  const BAD_LABEL = 'ce-label-1';
  beforeAll(() => {
    const catalog = parseCatalog(
      {
        models: {
          [LOGITS]: { source: model.dir, options: { activation: 'identity' } },
          [BAD_LABEL]: { source: model.dir, options: { labelIndex: 1 } },
        },
      },
      'cross-encoder test',
    );
    engine = new InferenceEngine({ catalog });
  });
  afterAll(async () => {
    await engine.close();
  });

  it('is detected as a cross-encoder with sigmoid from config.json', async () => {
    const profile = await engine.profile(model.dir);
    expect(profile.family).toBe('cross-encoder');
    expect(profile.options).toMatchObject({ activation: 'sigmoid', labelIndex: 0 });
  });

  for (const kase of model.cases.cases) {
    const expected = Expected.parse(kase.expected);
    const maxLength = kase.tokenization?.max_length;
    const lengthOption = maxLength === undefined ? {} : { max_length: maxLength };

    it(`${kase.id}: scores within atol ${model.atol}, sorted by score with request indices`, async () => {
      for (const group of groupByQuery(kase)) {
        const result = await engine.score({ model: model.dir, query: group.query, items: group.passages, ...lengthOption });
        expect(result.scores).toHaveLength(group.passages.length);
        expect(result.scores.map((s) => s.index).sort((a, b) => a - b)).toEqual(group.passages.map((_, i) => i));
        for (const scored of result.scores) {
          const want = expected.scores[group.pairIndex[scored.index] ?? -1] ?? Number.NaN;
          expect(Math.abs(scored.score - want), `${kase.id} item ${scored.index}`).toBeLessThanOrEqual(model.atol);
        }
        const expectedOrder = group.passages
          .map((_, i) => i)
          .sort((a, b) => (expected.scores[group.pairIndex[b] ?? -1] ?? 0) - (expected.scores[group.pairIndex[a] ?? -1] ?? 0));
        expect(result.scores.map((s) => s.index)).toEqual(expectedOrder);
      }
    });

    it(`${kase.id}: raw logits with activation overridden to identity`, async () => {
      for (const group of groupByQuery(kase)) {
        const result = await engine.score({ model: LOGITS, query: group.query, items: group.passages, ...lengthOption });
        for (const scored of result.scores) {
          const want = expected.logits[group.pairIndex[scored.index] ?? -1] ?? Number.NaN;
          expect(Math.abs(scored.score - want), `${kase.id} item ${scored.index}`).toBeLessThanOrEqual(model.atol);
        }
      }
    });
  }

  it('reorders: the better passage comes first even when given second', async () => {
    const kase = model.cases.cases.find((c) => c.id === 'query_two_docs');
    const [group] = kase === undefined ? [] : groupByQuery(kase);
    expect(group?.passages).toHaveLength(2);
    const [first, second] = group?.passages ?? [];
    const [firstScore, secondScore] = kase === undefined ? [] : Expected.parse(kase.expected).scores;
    // In every kit reranker the first passage (Berlin population) scores higher by more than the tolerance.
    expect((firstScore ?? 0) - (secondScore ?? 0)).toBeGreaterThan(10 * model.atol);
    const query = group?.query ?? '';
    const result = await engine.score({ model: model.dir, query, items: [{ text: second ?? '', id: 'b' }, { text: first ?? '', id: 'a' }] });
    expect(result.scores.map((s) => [s.index, s.id])).toEqual([
      [1, 'a'],
      [0, 'b'],
    ]);
    expect(Math.abs((result.scores[0]?.score ?? 0) - (firstScore ?? 0))).toBeLessThanOrEqual(model.atol);
    expect(result.usage.items).toBe(2);
  });

  it('top_k keeps only the best scores', async () => {
    const kase = model.cases.cases.find((c) => c.id === 'query_two_docs');
    const [group] = kase === undefined ? [] : groupByQuery(kase);
    const result = await engine.score({ model: model.dir, query: group?.query ?? '', items: group?.passages ?? [], top_k: 1 });
    expect(result.scores.map((s) => s.index)).toEqual([0]);
  });

  describe('refusals', () => {
    it('encode is UNSUPPORTED_OPERATION', async () => {
      await expect(engine.encode({ model: model.dir, items: ['How many people live in Berlin?'] })).rejects.toMatchObject({
        code: ErrorCode.UNSUPPORTED_OPERATION,
      });
    });

    it('a labelIndex beyond the logit columns fails to load with CONFIG_INVALID', async () => {
      await expect(engine.score({ model: BAD_LABEL, query: 'q', items: ['d'] })).rejects.toMatchObject({ code: ErrorCode.CONFIG_INVALID });
    });
  });
}

// BERT ([CLS] A [SEP] B [SEP] with type ids), ModernBERT (the same template, no token_type_ids
// input, mean classifier pooling in the graph) and XLM-R (bge-reranker-v2-m3: <s> A </s></s> B </s>).
for (const name of ['bert-cross-encoder', 'modernbert-cross-encoder', 'xlmr-cross-encoder']) {
  conformanceSuite(name, crossEncoderSuite);
}
