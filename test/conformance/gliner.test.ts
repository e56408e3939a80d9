import { join } from 'node:path';
import { noImageReader } from '../../adapters/models/family.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { describeModel, type DescribedModel } from '../../adapters/models/detect.js';
import type { PreparedGliner } from '../../adapters/models/family.js';
import { decodeFlat } from '../../adapters/models/gliner/gliner-decode.js';
import { collateGliner, windowRow } from '../../adapters/models/gliner/gliner-input.js';
import { gliner } from '../../adapters/models/gliner/gliner.js';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import type { Entity } from '../../adapters/protocol/results.js';
import { createSession, type ort } from '../../adapters/runtime/ort-session.js';
import { RuntimeOptions } from '../../adapters/runtime/runtime-options.js';
import { parseCatalog } from '../../pipelines/inference/catalog.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { conformanceSuite, expectAllClose, type ConformanceCase, type ConformanceModel } from '../helpers/conformance.js';

/**
 * GLiNER span NER against the kit: the graph inputs built by prepare + collate are compared
 * token for token with the kit's model_inputs and the ONNX logits at every valid span within atol
 * (session run directly, below the public API); entities through the public extract API, for
 * every case and with a threshold override. Long texts: windows of a repeated text must reproduce
 * the kit's entities of each copy, and overlapping windows must still find entities past max_len.
 */

const Inputs = z.looseObject({ texts: z.array(z.string()), labels: z.array(z.string()), threshold: z.number() });
const KitSpan = z.looseObject({ start_word: z.number(), end_word: z.number(), label: z.string(), score: z.number() });
const KitEntity = KitSpan.extend({ start: z.number(), end: z.number(), text: z.string() });
const Expected = z.array(z.looseObject({ candidates: z.array(KitSpan), entities: z.array(KitEntity) }));
const Tensor2 = z.array(z.array(z.number()));
const ModelInputs = z.looseObject({
  input_ids: Tensor2,
  attention_mask: Tensor2,
  words_mask: Tensor2,
  text_lengths: Tensor2,
  span_idx: z.array(Tensor2),
  span_mask: Tensor2,
});
const Logits = z.array(z.array(z.array(z.array(z.number()))));

function caseData(kase: ConformanceCase) {
  return {
    inputs: Inputs.parse(kase.inputs),
    expected: Expected.parse(kase.expected),
    modelInputs: ModelInputs.parse(kase.model_inputs),
    logits: Logits.parse(kase.raw_outputs?.logits),
  };
}

function numbers(tensor: ort.Tensor | undefined): number[] {
  if (tensor === undefined) return [];
  const data = tensor.data;
  if (data instanceof BigInt64Array) return Array.from(data, (v) => Number(v));
  if (data instanceof Uint8Array || data instanceof Float32Array) return Array.from(data);
  throw new Error(`unexpected tensor data ${tensor.type}`);
}

/** Entities compared exactly (offsets, text, label) and scores within atol. */
function expectEntities(actual: readonly Entity[] | undefined, expected: readonly Entity[], atol: number, label: string): void {
  const got = actual ?? [];
  expect(got.map((e) => [e.start, e.end, e.text, e.label]), label).toEqual(expected.map((e) => [e.start, e.end, e.text, e.label]));
  expectAllClose(got.map((e) => e.score), expected.map((e) => e.score), atol, `${label} scores`);
}

function glinerSuite(model: ConformanceModel): void {
  let described: DescribedModel;
  let session: ort.InferenceSession;
  let engine: InferenceEngine;
  const WINDOWED = 'gliner-15-words';
  const OVERLAPPED = 'gliner-20-words';
  beforeAll(async () => {
    described = await describeModel(model.name, model.dir);
    const file = described.profile.onnx.model ?? '';
    session = (await createSession(join(model.dir, file), RuntimeOptions.parse({ intraOpThreads: 1 }))).session;
    const catalog = parseCatalog(
      {
        models: {
          [WINDOWED]: { source: model.dir, options: { maxWords: 15, overlapWords: 0 } },
          [OVERLAPPED]: { source: model.dir, options: { maxWords: 20 } },
        },
      },
      'gliner test',
    );
    engine = new InferenceEngine({ catalog });
  });
  afterAll(async () => {
    await session.release();
    await engine.close();
  });

  it('is detected as gliner with the marker tokens resolved by the tokenizer', () => {
    expect(described.profile.family).toBe('gliner');
    expect(described.profile.options).toMatchObject({ entTokenId: 30522, sepTokenId: 30523, maxWidth: 12, maxWords: 384 });
  });

  async function prepared(texts: string[], labels: string[]): Promise<PreparedGliner[]> {
    const context = { profile: described.profile, tokenizer: described.tokenizer, readImage: noImageReader };
    const items = texts.map((text) => ({ text, role: 'document' as const }));
    const out = await gliner.prepare(context, { task: 'extract', items, maxLength: described.profile.maxLength, labels });
    return out.map((item) => {
      if (item.kind !== 'gliner') throw new Error('gliner.prepare returned a non-gliner item');
      return item;
    });
  }

  for (const kase of model.cases.cases) {
    it(`${kase.id}: model inputs are exact`, async () => {
      const { inputs, modelInputs } = caseData(kase);
      const items = await prepared(inputs.texts, inputs.labels);
      expect(items.map((item) => item.windows.length)).toEqual(inputs.texts.map(() => 1));
      expect(items.every((item) => !item.truncated)).toBe(true);
      const rows = items.map((item) => windowRow(item, item.windows[0] ?? { tokens: [0, 0], firstWord: 0, wordCount: 0 }));
      const batch = collateGliner(rows, described.profile.tokenizer?.padId ?? 0, 12);
      for (const name of ['input_ids', 'attention_mask', 'words_mask', 'text_lengths', 'span_mask'] as const) {
        expect(numbers(batch.feeds[name]), name).toEqual(modelInputs[name].flat());
      }
      expect(numbers(batch.feeds.span_idx), 'span_idx').toEqual(modelInputs.span_idx.flat(2));
      expect(batch.feeds.span_mask?.type).toBe('bool');
    });

    it(`${kase.id}: logits at valid spans within atol ${model.atol}`, async () => {
      const { inputs, modelInputs, logits } = caseData(kase);
      const items = await prepared(inputs.texts, inputs.labels);
      const rows = items.map((item) => windowRow(item, item.windows[0] ?? { tokens: [0, 0], firstWord: 0, wordCount: 0 }));
      const batch = collateGliner(rows, 0, 12);
      const output = (await session.run(batch.feeds)).logits;
      const dims = output?.dims ?? [];
      expect(dims).toEqual([inputs.texts.length, batch.maxWords, 12, inputs.labels.length]);
      const got = numbers(output);
      const actual: number[] = [];
      const expected: number[] = [];
      const labels = inputs.labels.length;
      modelInputs.span_mask.forEach((mask, b) => {
        mask.forEach((valid, span) => {
          if (valid !== 1) return;
          const s = Math.floor(span / 12);
          const w = span % 12;
          for (let c = 0; c < labels; c++) {
            actual.push(got[((b * batch.maxWords + s) * 12 + w) * labels + c] ?? Number.NaN);
            expected.push(logits[b]?.[s]?.[w]?.[c] ?? Number.NaN);
          }
        });
      });
      expect(expected.length).toBeGreaterThan(0);
      expectAllClose(actual, expected, model.atol, `${kase.id} logits`);
    });

    it(`${kase.id}: entities through extract are exact, scores within atol`, async () => {
      const { inputs, expected } = caseData(kase);
      const result = await engine.extract({ model: model.dir, items: inputs.texts, labels: inputs.labels });
      expect(result.items).toHaveLength(expected.length);
      result.items.forEach((item, i) => {
        expect(item.index).toBe(i);
        expectEntities(item.entities, expected[i]?.entities ?? [], model.atol, `${kase.id}[${i}]`);
      });
    });
  }

  it('a threshold override keeps only spans above it, decoded again greedily', async () => {
    const kase = model.cases.cases.find((c) => c.id === 'ronaldo') ?? model.cases.cases[0];
    if (kase === undefined) throw new Error('kit has no cases');
    const { inputs, expected } = caseData(kase);
    const threshold = 0.6;
    const labels = inputs.labels;
    const words = kase.words;
    const spans = z.array(z.array(z.tuple([z.string(), z.number(), z.number()]))).parse(words)[0] ?? [];
    const text = inputs.texts[0] ?? '';
    const above = (expected[0]?.candidates ?? [])
      .filter((c) => c.score > threshold)
      .map((c) => ({ start: c.start_word, end: c.end_word, label: labels.indexOf(c.label), score: c.score }));
    const want = decodeFlat(above, spans.length).map((c) => {
      const start = spans[c.start]?.[1] ?? -1;
      const end = spans[c.end]?.[2] ?? -1;
      return { start, end, text: text.slice(start, end), label: labels[c.label] ?? '', score: c.score };
    });
    expect(want.length).toBeGreaterThan(0);
    expect(want.length).not.toBe(expected[0]?.entities.length);
    const result = await engine.extract({ model: model.dir, items: [text], labels, threshold });
    expectEntities(result.items[0]?.entities, want, model.atol, 'threshold 0.6');
  });

  it('refuses an extract request without labels as INVALID_INPUT', async () => {
    await expect(engine.extract({ model: model.dir, items: ['Apple is in Cupertino.'] })).rejects.toMatchObject({
      code: ErrorCode.INVALID_INPUT,
    });
  });

  it('empty and blank texts give no entities, beside a text whose entities are unchanged', async () => {
    const kase = model.cases.cases.find((c) => c.id === 'apple');
    if (kase === undefined) throw new Error('kit has no apple case');
    const { inputs, expected } = caseData(kase);
    const result = await engine.extract({ model: model.dir, items: ['', inputs.texts[0] ?? '', ' \n\t '], labels: inputs.labels });
    expect(result.items.map((item) => item.entities?.length)).toEqual([0, expected[0]?.entities.length, 0]);
    expectEntities(result.items[1]?.entities, expected[0]?.entities ?? [], model.atol, 'apple beside blank texts');
  });

  it('refuses labels holding a marker token, and labels that leave no room for text, as INVALID_INPUT', async () => {
    await expect(engine.extract({ model: model.dir, items: ['Apple'], labels: ['person', 'x <<ENT>> y'] })).rejects.toMatchObject({
      code: ErrorCode.INVALID_INPUT,
    });
    await expect(engine.extract({ model: model.dir, items: ['Apple'], labels: ['person', 'location'], max_length: 6 })).rejects.toMatchObject({
      code: ErrorCode.INVALID_INPUT,
    });
  });

  it('tokenize shows how the text itself is read: each word on its own between [CLS] and [SEP]', async () => {
    const kase = model.cases.cases[0];
    if (kase === undefined) throw new Error('kit has no cases');
    const { inputs, modelInputs } = caseData(kase);
    const result = await engine.tokenize({ model: model.dir, items: [inputs.texts[0] ?? ''] });
    const ids = modelInputs.input_ids[0] ?? [];
    const sep = ids.indexOf(30523);
    expect(result.items[0]?.ids).toEqual([ids[0], ...ids.slice(sep + 1)]);
  });

  describe('texts longer than one window', () => {
    async function preparedWith(name: string, texts: string[], labels: string[]): Promise<PreparedGliner[]> {
      const profile = await engine.profile(name);
      const items = texts.map((text) => ({ text, role: 'document' as const }));
      const out = await gliner.prepare({ profile, tokenizer: described.tokenizer, readImage: noImageReader }, { task: 'extract', items, maxLength: profile.maxLength, labels });
      return out.filter((item): item is PreparedGliner => item.kind === 'gliner');
    }

    it('a token budget cuts windows by tokens; a word longer than a window keeps its first sub-tokens and is marked truncated', async () => {
      const profile = described.profile;
      const text = 'Apple a-b-c-d-e-f-g-h-i-j was founded in Cupertino by Steve Jobs.';
      const items = [{ text, role: 'document' as const }];
      const maxLength = 17; // [CLS] <<ENT>> person <<ENT>> location <<SEP>> ... [SEP]: 10 tokens of words a window
      const [item] = await gliner.prepare({ profile, tokenizer: described.tokenizer, readImage: noImageReader }, { task: 'extract', items, maxLength, labels: ['person', 'location'] });
      if (item?.kind !== 'gliner') throw new Error('no gliner item');
      expect(item.truncated).toBe(true);
      expect(item.length).toBe(7 + 1 + 19 + 10); // prompt and specials, Apple, the hyphenated word, the rest
      expect(item.windows.map((w) => w.tokens[1] - w.tokens[0])).toEqual([8, 17, 17]);
      expect(item.windows.map((w) => [w.firstWord, w.wordCount])).toEqual([[0, 1], [1, 1], [2, 8]]);
      for (const window of item.windows) {
        const row = windowRow(item, window);
        expect(row.ids.length).toBeLessThanOrEqual(maxLength);
        expect(row.wordsMask.filter((m) => m > 0)).toEqual(Array.from({ length: window.wordCount }, (_, k) => k + 1));
      }
      const result = await engine.extract({ model: model.dir, items: [text], labels: ['person', 'location'], max_length: maxLength });
      for (const e of result.items[0]?.entities ?? []) expect(text.slice(e.start, e.end)).toBe(e.text);
    });

    it('windows of 15 words without overlap reproduce each copy of a 15-word text exactly', async () => {
      const kase = model.cases.cases.find((c) => c.id === 'batch_two_texts');
      if (kase === undefined) throw new Error('kit has no batch_two_texts case');
      const { inputs, expected } = caseData(kase);
      const sentence = inputs.texts[1] ?? '';
      const copies = 3;
      const text = Array.from({ length: copies }, () => sentence).join(' ');
      const [item] = await preparedWith(WINDOWED, [text], inputs.labels);
      expect(item?.windows.map((w) => [w.firstWord, w.wordCount])).toEqual([[0, 15], [15, 15], [30, 15]]);
      const once = expected[1]?.entities ?? [];
      expect(once.length).toBeGreaterThan(0);
      const want = Array.from({ length: copies }, (_, k) =>
        once.map((e) => ({ ...e, start: e.start + k * (sentence.length + 1), end: e.end + k * (sentence.length + 1) })),
      ).flat();
      const result = await engine.extract({ model: WINDOWED, items: [text], labels: inputs.labels });
      expectEntities(result.items[0]?.entities, want, model.atol, 'three copies');
    });

    it('overlapping windows: each span scored by the window where it is farthest from a cut, decoded as one text', async () => {
      const kase = model.cases.cases.find((c) => c.id === 'ronaldo');
      if (kase === undefined) throw new Error('kit has no ronaldo case');
      const { inputs } = caseData(kase);
      const text = inputs.texts[0] ?? '';
      const labels = inputs.labels;
      const [item] = await preparedWith(OVERLAPPED, [text], labels);
      if (item === undefined) throw new Error('no prepared item');
      const total = item.words.length;
      expect(total).toBe(37);
      const windows = item.windows.map((w) => ({ first: w.firstWord, end: w.firstWord + w.wordCount }));
      expect(windows).toEqual([{ first: 0, end: 20 }, { first: 9, end: 29 }, { first: 18, end: 37 }]);
      // Each window run alone; the expected span scores are taken, independently of the decoder,
      // from the containing window with the largest distance to a cut edge (earliest on a tie).
      const perWindow: number[][] = [];
      for (const window of item.windows) {
        const batch = collateGliner([windowRow(item, window)], 0, 12);
        perWindow.push(numbers((await session.run(batch.feeds)).logits));
      }
      const candidates: { start: number; end: number; label: number; score: number }[] = [];
      for (let s = 0; s < total; s++) {
        for (let e = s; e < Math.min(total, s + 12); e++) {
          let best = -1;
          let bestMargin = -1;
          windows.forEach((w, i) => {
            if (w.first > s || e >= w.end) return;
            const before = w.first === 0 ? Infinity : s - w.first;
            const after = w.end === total ? Infinity : w.end - 1 - e;
            if (Math.min(before, after) > bestMargin) {
              best = i;
              bestMargin = Math.min(before, after);
            }
          });
          const w = windows[best];
          const logits = perWindow[best];
          if (w === undefined || logits === undefined) throw new Error(`span ${s}..${e} is in no window`);
          const words = w.end - w.first;
          for (let c = 0; c < labels.length; c++) {
            const logit = logits[((s - w.first) * 12 + (e - s)) * labels.length + c] ?? Number.NaN;
            const score = 1 / (1 + Math.exp(-logit));
            if (score > 0.5 && s - w.first < words) candidates.push({ start: s, end: e, label: c, score });
          }
        }
      }
      const want = decodeFlat(candidates, total).map((c) => {
        const start = item.words[c.start]?.[0] ?? -1;
        const end = item.words[c.end]?.[1] ?? -1;
        return { start, end, text: text.slice(start, end), label: labels[c.label] ?? '', score: c.score };
      });
      expect(want.some((e) => e.start >= 114)).toBe(true); // past word 20 ("forward" starts at 114)
      const result = await engine.extract({ model: OVERLAPPED, items: [text], labels });
      expectEntities(result.items[0]?.entities, want, model.atol, 'overlapping windows');
    });
  });
}

conformanceSuite('gliner-span', glinerSuite);
