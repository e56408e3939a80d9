import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Entity } from '../../../../../adapters/protocol/results.js';
import { InferenceEngine } from '../../../../../pipelines/inference/engine.js';
import { glinerLogits, loadTinyModel, sigmoid } from '../../../../helpers/tiny-model.js';

/**
 * GLiNER family (fixture tiny-gliner: gliner_config.json span_mode markerV0, max_width 12,
 * <<ENT>>/<<SEP>> added tokens; the graph takes input_ids, attention_mask, words_mask,
 * text_lengths, span_idx, span_mask and gives logits [batch, words, 12, labels]). The fixture
 * graph gives invalid spans (past a text's last word, or masked) a logit of +8, so a decoder that
 * does not skip them, or wrong masks fed to the graph, surface as entities.
 */

const model = loadTinyModel('tiny-gliner');
const ATOL = 2e-5;
const THRESHOLD = 0.5;

interface Word {
  /** The word as it appears in the text. */
  text: string;
  /** Its WordPiece tokens (each word is tokenized on its own). */
  tokens: string[];
}

interface Case {
  text: string;
  words: Word[];
}

const w = (text: string, ...tokens: string[]): Word => ({ text, tokens: tokens.length === 0 ? [text.toLowerCase()] : tokens });

const ALICE: Case = {
  text: 'Alice Smith visited the Eiffel tower in Paris.',
  words: [w('Alice'), w('Smith'), w('visited'), w('the'), w('Eiffel'), w('tower'), w('in'), w('Paris'), w('.')],
};
const BOB: Case = {
  text: 'Bob works at Acme Corp in Zürich.',
  words: [w('Bob'), w('works'), w('at'), w('Acme'), w('Corp'), w('in'), w('Zürich', 'zu', '##rich'), w('.')],
};
const PARK: Case = {
  text: 'the cat-dog runs in the park',
  words: [w('the'), w('cat-dog', 'cat', '-', 'dog'), w('runs'), w('in'), w('the'), w('park')],
};

const labelTokens = (label: string): string[] => label.split(' ');

/** [CLS] <<ENT>> label … <<SEP>> words [SEP], and the position of each word's first sub-token. */
function sequence(kase: Case, labels: readonly string[]): { tokens: string[]; firstTokens: number[] } {
  const tokens = ['[CLS]', ...labels.flatMap((label) => ['<<ENT>>', ...labelTokens(label)]), '<<SEP>>'];
  const firstTokens: number[] = [];
  for (const word of kase.words) {
    firstTokens.push(tokens.length);
    tokens.push(...word.tokens);
  }
  tokens.push('[SEP]');
  return { tokens, firstTokens };
}

/** Character span of every word, found in order in the text. */
function wordSpans(kase: Case): [number, number][] {
  let cursor = 0;
  return kase.words.map((word) => {
    const start = kase.text.indexOf(word.text, cursor);
    if (start < 0) throw new Error(`${word.text} not in ${kase.text}`);
    cursor = start + word.text.length;
    return [start, cursor];
  });
}

interface Candidate {
  start: number;
  end: number;
  label: number;
  score: number;
  logit: number;
}

function candidates(kase: Case, labels: readonly string[]): { all: Candidate[]; minAbsLogit: number } {
  const { tokens, firstTokens } = sequence(kase, labels);
  const logits = glinerLogits(model, model.ids(tokens), firstTokens);
  const all: Candidate[] = [];
  let minAbsLogit = Number.POSITIVE_INFINITY;
  logits.forEach((widths, start) =>
    widths.forEach((row, width) =>
      row?.forEach((logit, label) => {
        minAbsLogit = Math.min(minAbsLogit, Math.abs(logit));
        all.push({ start, end: start + width, label, score: sigmoid(logit), logit });
      }),
    ),
  );
  return { all, minAbsLogit };
}

/** Greedy flat decoding: best first, skip overlaps, then in text order. */
function expectedEntities(kase: Case, labels: readonly string[], threshold = THRESHOLD): Entity[] {
  const spans = wordSpans(kase);
  const above = candidates(kase, labels).all.filter((c) => c.score > threshold);
  const sorted = [...above].sort((a, b) => b.score - a.score);
  const kept: Candidate[] = [];
  for (const c of sorted) if (kept.every((k) => c.start > k.end || k.start > c.end)) kept.push(c);
  return kept
    .sort((a, b) => a.start - b.start)
    .map((c) => {
      const start = spans[c.start]?.[0] ?? 0;
      const end = spans[c.end]?.[1] ?? 0;
      return { text: kase.text.slice(start, end), label: labels[c.label] ?? '?', score: c.score, start, end };
    });
}

function expectEntities(actual: Entity[] | undefined, expected: Entity[], label: string): void {
  expect(actual?.map(({ score: _score, ...rest }) => rest), label).toEqual(expected.map(({ score: _score, ...rest }) => rest));
  actual?.forEach((entity, i) => expect(Math.abs(entity.score - (expected[i]?.score ?? Number.NaN)), `${label}[${i}] score`).toBeLessThanOrEqual(ATOL));
}

const LABELS = ['person', 'location'];
const LABELS_3 = ['person', 'organization', 'city name'];

let engine: InferenceEngine;
beforeAll(() => {
  engine = new InferenceEngine();
});
afterAll(async () => {
  await engine.close();
});

describe('gliner family: tiny-gliner', () => {
  it('the fixture cases are unambiguous and exercise the greedy decoding', () => {
    for (const [kase, labels] of [[ALICE, LABELS], [BOB, LABELS_3], [PARK, LABELS]] as const) {
      const { all, minAbsLogit } = candidates(kase, labels);
      expect(minAbsLogit, kase.text).toBeGreaterThan(1e-3);
      const scores = all.filter((c) => c.score > THRESHOLD).map((c) => c.score).sort((a, b) => a - b);
      scores.slice(1).forEach((s, i) => expect(s - (scores[i] ?? 0), `${kase.text}: candidate gap`).toBeGreaterThan(1e-5));
    }
    // Overlapping candidates exist, so the greedy step decides something, and entities come out.
    for (const [kase, labels] of [[ALICE, LABELS], [BOB, LABELS_3]] as const) {
      const found = expectedEntities(kase, labels).length;
      expect(found, kase.text).toBeGreaterThan(0);
      expect(found, kase.text).toBeLessThan(candidates(kase, labels).all.filter((c) => c.score > THRESHOLD).length);
    }
  });

  it('is detected from gliner_config.json', async () => {
    const profile = await engine.profile(model.dir);
    expect(profile.family).toBe('gliner');
  });

  it('requires labels', async () => {
    await expect(engine.extract({ model: model.dir, items: [ALICE.text] })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
  });

  it('decodes spans greedily into non-overlapping entities with character offsets', async () => {
    const result = await engine.extract({ model: model.dir, items: [ALICE.text], labels: LABELS });
    expectEntities(result.items[0]?.entities, expectedEntities(ALICE, LABELS), ALICE.text);
  });

  it('keeps a multi-word label as one prompt item and maps sub-word words back to whole words', async () => {
    const result = await engine.extract({ model: model.dir, items: [BOB.text], labels: LABELS_3 });
    expectEntities(result.items[0]?.entities, expectedEntities(BOB, LABELS_3), BOB.text);
  });

  it('splits words like GLiNER (cat-dog is one word) and decodes a padded batch row by row', async () => {
    // 9, 6 and 9 words: the shorter row's spans past its end must be skipped.
    const result = await engine.extract({ model: model.dir, items: [ALICE.text, PARK.text, ALICE.text], labels: LABELS });
    expectEntities(result.items[0]?.entities, expectedEntities(ALICE, LABELS), 'row 0');
    expectEntities(result.items[1]?.entities, expectedEntities(PARK, LABELS), 'row 1');
    expectEntities(result.items[2]?.entities, expectedEntities(ALICE, LABELS), 'row 2');
  });

  it('applies a request threshold', async () => {
    const threshold = 0.3;
    const expected = expectedEntities(ALICE, LABELS, threshold);
    expect(expected).not.toEqual(expectedEntities(ALICE, LABELS));
    const result = await engine.extract({ model: model.dir, items: [ALICE.text], labels: LABELS, threshold });
    expectEntities(result.items[0]?.entities, expected, 'threshold 0.3');
  });
});
