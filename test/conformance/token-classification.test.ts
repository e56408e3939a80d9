import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import type { Entity } from '../../adapters/protocol/results.js';
import { TextTokenizer } from '../../adapters/tokenizers/text-tokenizer.js';
import { parseCatalog } from '../../pipelines/inference/catalog.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { conformanceDir, conformanceSuite, type ConformanceModel } from '../helpers/conformance.js';

/**
 * bert-token-classification (BertForTokenClassification, CoNLL labels) through the public
 * extract / tokenize API: token ids and offsets, 'simple' and 'first' aggregation as the Hugging
 * Face pipeline computes them, per-token 'none' output, threshold, and long texts read in windows.
 * The kit reports offsets in code points (Python); Shoal's are UTF-16 units, so kit offsets are
 * converted before comparing (they differ after the emoji of `subwords_unicode`).
 */

const KitEntity = z.looseObject({ entity_group: z.string(), score: z.number(), start: z.number(), end: z.number(), text: z.string() });
const KitToken = z.looseObject({ word: z.string(), entity: z.string(), score: z.number(), start: z.number(), end: z.number() });
const KitExpected = z.array(
  z.looseObject({
    text: z.string(),
    tokens: z.array(KitToken),
    entities_simple: z.array(KitEntity),
    entities_first: z.array(KitEntity),
  }),
);
const Inputs = z.looseObject({ texts: z.array(z.string()) });

/** Code-point offset → UTF-16 offset in `text`. */
function utf16(text: string, codePoint: number): number {
  return [...text].slice(0, codePoint).join('').length;
}

/** The kit folder again, through catalog entries that override the family's long-text options. */
const OVERLAP_3 = 'ner-overlap-3';
const TRUNCATE = 'ner-truncate';

let engine: InferenceEngine;
beforeAll(() => {
  const dir = conformanceDir('bert-token-classification');
  const catalog = parseCatalog(
    {
      models: {
        [OVERLAP_3]: { source: dir, options: { overlap: 3 } },
        [TRUNCATE]: { source: dir, options: { longText: 'truncate' } },
      },
    },
    'token-classification test',
  );
  engine = new InferenceEngine({ catalog });
});
afterAll(async () => {
  await engine.close();
});

function expectEntities(actual: readonly Entity[], expected: readonly Entity[], atol: number, label: string): void {
  expect(actual.map(({ label: l, start, end, text }) => ({ label: l, start, end, text })), label).toEqual(
    expected.map(({ label: l, start, end, text }) => ({ label: l, start, end, text })),
  );
  actual.forEach((entity, i) => {
    expect(Math.abs(entity.score - (expected[i]?.score ?? Number.NaN)), `${label}[${i}] score`).toBeLessThanOrEqual(atol);
  });
}

function tokenClassificationSuite(model: ConformanceModel): void {
  const { atol } = model;
  const cases = model.cases.cases.map((kase) => ({
    id: kase.id,
    texts: Inputs.parse(kase.inputs).texts,
    ids: (kase.encodings ?? []).map((e) => e.input_ids),
    tokens: (kase.encodings ?? []).map((e) => z.array(z.string()).parse(e.tokens)),
    expected: KitExpected.parse(kase.expected),
  }));

  const kitEntities = (text: string, list: z.infer<typeof KitEntity>[]): Entity[] =>
    list.map((e) => ({ label: e.entity_group, score: e.score, start: utf16(text, e.start), end: utf16(text, e.end), text: e.text }));

  for (const kase of cases) {
    it(`${kase.id}: token ids are exact`, async () => {
      const result = await engine.tokenize({ model: model.dir, items: kase.texts });
      expect(result.items.map((i) => i.ids)).toEqual(kase.ids);
      expect(result.items.every((i) => !i.truncated)).toBe(true);
    });

    it(`${kase.id}: encodeWithOffsets gives the kit's ids and character offsets`, async () => {
      const tokenizer = await TextTokenizer.load(model.dir);
      kase.texts.forEach((text, i) => {
        const encoded = tokenizer.encodeWithOffsets(text, 512);
        const expected = kase.expected[i];
        expect(encoded.ids).toEqual(kase.ids[i]);
        // Kit token records skip [CLS] and [SEP]; special tokens have no span.
        expect([encoded.offsets[0], encoded.offsets.at(-1)]).toEqual([[0, 0], [0, 0]]);
        expect(encoded.offsets.slice(1, -1)).toEqual(expected?.tokens.map((t) => [utf16(text, t.start), utf16(text, t.end)]));
        expect(encoded.tokens).toEqual(kase.tokens[i]);
      });
    });

    for (const strategy of ['simple', 'first'] as const) {
      it(`${kase.id}: '${strategy}' entities match (labels, offsets, text exact; scores within ${atol})`, async () => {
        const result = await engine.extract({ model: model.dir, items: kase.texts, aggregation: strategy });
        expect(result.items).toHaveLength(kase.texts.length);
        result.items.forEach((item, i) => {
          const text = kase.texts[i] ?? '';
          const expected = kase.expected[i];
          const list = strategy === 'simple' ? expected?.entities_simple : expected?.entities_first;
          expect(item.index).toBe(i);
          expectEntities(item.entities ?? [], kitEntities(text, list ?? []), atol, `${kase.id}[${i}] ${strategy}`);
          for (const entity of item.entities ?? []) expect(entity.text).toBe(text.slice(entity.start, entity.end));
        });
      });
    }

    it(`${kase.id}: 'none' gives one entity per non-O token with its full label`, async () => {
      const result = await engine.extract({ model: model.dir, items: kase.texts, aggregation: 'none' });
      result.items.forEach((item, i) => {
        const text = kase.texts[i] ?? '';
        const expected = (kase.expected[i]?.tokens ?? [])
          .filter((t) => t.entity !== 'O')
          .map((t): Entity => {
            const start = utf16(text, t.start);
            const end = utf16(text, t.end);
            return { label: t.entity, score: t.score, start, end, text: text.slice(start, end) };
          });
        expect(expected.length).toBeGreaterThan(0);
        expectEntities(item.entities ?? [], expected, atol, `${kase.id}[${i}] none`);
      });
    });
  }

  it('the default aggregation is simple', async () => {
    const kase = cases.find((c) => c.id === 'merkel_macron');
    const text = kase?.texts[0] ?? '';
    const result = await engine.extract({ model: model.dir, items: [text] });
    expectEntities(result.items[0]?.entities ?? [], kitEntities(text, kase?.expected[0]?.entities_simple ?? []), atol, 'default');
  });

  it('threshold drops exactly the entities scoring below it', async () => {
    const kase = cases.find((c) => c.id === 'batch_two');
    const text = kase?.texts[1] ?? '';
    const all = kitEntities(text, kase?.expected[1]?.entities_simple ?? []);
    const threshold = 0.4;
    // The cut must not fall within tolerance of a reference score, or the test would be a coin toss.
    expect(all.every((e) => Math.abs(e.score - threshold) > atol)).toBe(true);
    const kept = all.filter((e) => e.score >= threshold);
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.length).toBeLessThan(all.length);
    const result = await engine.extract({ model: model.dir, items: [text], threshold });
    expectEntities(result.items[0]?.entities ?? [], kept, atol, 'threshold 0.4');
  });

  it('encode and score are UNSUPPORTED_OPERATION', async () => {
    await expect(engine.encode({ model: model.dir, items: ['My name is Wolfgang.'] })).rejects.toMatchObject({
      code: ErrorCode.UNSUPPORTED_OPERATION,
    });
    await expect(engine.score({ model: model.dir, query: 'Berlin', items: ['My name is Wolfgang.'] })).rejects.toMatchObject({
      code: ErrorCode.UNSUPPORTED_OPERATION,
    });
  });

  it('detects the family and its labels from config.json', async () => {
    const profile = await engine.profile(model.dir);
    expect(profile.family).toBe('token-classification');
    expect(profile.options.labels).toEqual(model.cases.conventions.labels);
  });

  describe('long texts are read in overlapping windows', () => {
    // batch_two's second text: 14 whole-word tokens, so any run of them is itself a text whose
    // tokenization is exactly that run, and the model sees the same ids at the same positions.
    const kase = cases.find((c) => c.id === 'batch_two');
    const text = kase?.texts[1] ?? '';
    // No character outside the BMP: the kit's code-point offsets are UTF-16 offsets here.
    const spans = (kase?.expected[1]?.tokens ?? []).map((t): [number, number] => [t.start, t.end]);

    /**
     * The 'none' entities a windowed run must give: for each window [start, end) keeping
     * [keepStart, keepEnd), the entities of the window's own text, on the tokens it keeps.
     */
    async function expectedFromWindows(windows: [number, number, number, number][]): Promise<Entity[]> {
      const out: Entity[] = [];
      for (const [start, end, keepStart, keepEnd] of windows) {
        const from = spans[start]?.[0] ?? 0;
        const alone = await engine.extract({ model: model.dir, items: [text.slice(from, spans[end - 1]?.[1])], aggregation: 'none' });
        const keepFrom = spans[keepStart]?.[0] ?? 0;
        const keepTo = spans[keepEnd - 1]?.[1] ?? 0;
        for (const entity of alone.items[0]?.entities ?? []) {
          const shifted = { ...entity, start: entity.start + from, end: entity.end + from };
          if (shifted.start >= keepFrom && shifted.start < keepTo) out.push(shifted);
        }
      }
      return out;
    }

    it('tokenize reports every token, untruncated, when windows are on', async () => {
      const result = await engine.tokenize({ model: model.dir, items: [text], max_length: 8 });
      expect(result.items[0]?.ids).toEqual(kase?.ids[1]);
      expect(result.items[0]?.truncated).toBe(false);
    });

    it('each token is predicted by the window that keeps it, as if that window were the whole text', async () => {
      expect(spans).toHaveLength(14);
      // max_length 8: windows of 6 tokens sharing floor(6 / 4) = 1, the last aligned to the end.
      const expected = await expectedFromWindows([
        [0, 6, 0, 5],
        [5, 11, 5, 9],
        [8, 14, 9, 14],
      ]);
      const windowed = await engine.extract({ model: model.dir, items: [text], max_length: 8, aggregation: 'none' });
      const got = windowed.items[0]?.entities ?? [];
      expect(expected.length).toBeGreaterThan(3);
      expectEntities(got, expected, 1e-5, 'windowed none');
      for (const e of got) expect(e.text).toBe(text.slice(e.start, e.end));
      // Entities come from the last window, past what truncation to 8 tokens would keep.
      expect(got.some((e) => e.start >= text.indexOf('yesterday'))).toBe(true);
    });

    it('options.overlap (catalog) sets how many tokens consecutive windows share', async () => {
      const expected = await expectedFromWindows([
        [0, 6, 0, 4],
        [3, 9, 4, 7],
        [6, 12, 7, 10],
        [8, 14, 10, 14],
      ]);
      const windowed = await engine.extract({ model: OVERLAP_3, items: [text], max_length: 8, aggregation: 'none' });
      expectEntities(windowed.items[0]?.entities ?? [], expected, 1e-5, 'overlap 3');
    });

    it("options.longText 'truncate' (catalog) keeps only the first max_length tokens", async () => {
      const tokenized = await engine.tokenize({ model: TRUNCATE, items: [text], max_length: 8 });
      expect(tokenized.items[0]?.ids).toEqual([...(kase?.ids[1] ?? []).slice(0, 7), 102]);
      expect(tokenized.items[0]?.truncated).toBe(true);
      const expected = await expectedFromWindows([[0, 6, 0, 6]]);
      const truncated = await engine.extract({ model: TRUNCATE, items: [text], max_length: 8, aggregation: 'none' });
      expectEntities(truncated.items[0]?.entities ?? [], expected, 1e-5, 'truncate');
    });

    it('aggregation runs over the stitched tokens: entities are whole, ordered and never duplicated', async () => {
      for (const strategy of ['simple', 'first'] as const) {
        const result = await engine.extract({ model: model.dir, items: [text], max_length: 8, aggregation: strategy });
        const entities = result.items[0]?.entities ?? [];
        expect(entities.length).toBeGreaterThan(0);
        entities.forEach((e, i) => {
          expect(e.text).toBe(text.slice(e.start, e.end));
          if (i > 0) expect(e.start).toBeGreaterThanOrEqual(entities[i - 1]?.end ?? 0);
        });
      }
    });

    it('a long text batched with short ones leaves their results unchanged', async () => {
      const long = Array.from({ length: 60 }, () => text).join(' ');
      const short = cases.find((c) => c.id === 'wolfgang');
      const shortText = short?.texts[0] ?? '';
      const result = await engine.extract({ model: model.dir, items: [shortText, long, shortText], aggregation: 'simple' });
      const reference = kitEntities(shortText, short?.expected[0]?.entities_simple ?? []);
      expectEntities(result.items[0]?.entities ?? [], reference, atol, 'short before long');
      expectEntities(result.items[2]?.entities ?? [], reference, atol, 'short after long');
      const entities = result.items[1]?.entities ?? [];
      // 60 × 14 tokens: windows of 510 reach the last copy of the sentence.
      expect(entities.some((e) => e.start > long.length - text.length)).toBe(true);
      for (const e of entities) expect(e.text).toBe(long.slice(e.start, e.end));
    });

    it('max_length with no room for text next to [CLS] [SEP] is INVALID_INPUT', async () => {
      await expect(engine.extract({ model: model.dir, items: [text], max_length: 2 })).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT });
    });
  });
}

conformanceSuite('bert-token-classification', tokenClassificationSuite);
