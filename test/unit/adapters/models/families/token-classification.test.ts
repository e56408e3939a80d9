import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Entity } from '../../../../../adapters/protocol/results.js';
import { InferenceEngine } from '../../../../../pipelines/inference/engine.js';
import { argmax, loadTinyModel, softmax, tokenOutputs } from '../../../../helpers/tiny-model.js';

/**
 * Token-classification family (fixture tiny-ner: BertForTokenClassification with the 9 CoNLL
 * labels in config.json id2label). The expected entities are rebuilt here from the fixture's
 * weights with the Hugging Face TokenClassificationPipeline rules ('none', 'simple', 'first'),
 * and the character offsets from hand-written token surfaces (an accent or an [UNK] word keeps
 * its original characters).
 */

const model = loadTinyModel('tiny-ner');
const ATOL = 2e-5;
const LABELS = ['O', 'B-PER', 'I-PER', 'B-ORG', 'I-ORG', 'B-LOC', 'I-LOC', 'B-MISC', 'I-MISC'];

interface TokenSpec {
  token: string;
  /** The characters of the original text the token stands for. */
  surface: string;
}

interface Case {
  text: string;
  tokens: TokenSpec[];
}

const t = (token: string, surface = token): TokenSpec => ({ token, surface });

const CASES: Case[] = [
  {
    text: 'Alice Smith works for Acme Corp in Paris.',
    tokens: [t('alice', 'Alice'), t('smith', 'Smith'), t('works'), t('for'), t('acme', 'Acme'), t('corp', 'Corp'), t('in'), t('paris', 'Paris'), t('.')],
  },
  {
    text: 'Bob visited Zürich and London 🙂',
    tokens: [t('bob', 'Bob'), t('visited'), t('zu', 'Zü'), t('##rich', 'rich'), t('and'), t('london', 'London'), t('[UNK]', '🙂')],
  },
  {
    text: 'Unbelievable tokenizers from Google, naïve café',
    tokens: [
      t('un', 'Un'), t('##believ', 'believ'), t('##able', 'able'), t('token'), t('##izer', 'izer'), t('##s', 's'),
      t('from'), t('google', 'Google'), t(','), t('naive', 'naïve'), t('cafe', 'café'),
    ],
  },
  {
    text: 'John plays near the Eiffel tower xyzzy',
    tokens: [t('john', 'John'), t('play', 'play'), t('##s', 's'), t('near'), t('the'), t('eiffel', 'Eiffel'), t('tower'), t('[UNK]', 'xyzzy')],
  },
];

interface TokenPrediction {
  token: string;
  label: string;
  score: number;
  /** Best minus second-best logit: how safe the argmax is. */
  margin: number;
  start: number;
  end: number;
}

function predictions(kase: Case): TokenPrediction[] {
  const tokens = ['[CLS]', ...kase.tokens.map((s) => s.token), '[SEP]'];
  const logits = tokenOutputs(model, { ids: model.ids(tokens) }).slice(1, -1);
  let cursor = 0;
  return kase.tokens.map((spec, i) => {
    const start = kase.text.indexOf(spec.surface, cursor);
    if (start < 0) throw new Error(`surface ${spec.surface} not found in ${kase.text}`);
    cursor = start + spec.surface.length;
    const row = logits[i] ?? [];
    const best = argmax(row);
    const second = Math.max(...row.filter((_, k) => k !== best));
    return { token: spec.token, label: LABELS[best] ?? '?', score: softmax(row)[best] ?? 0, margin: (row[best] ?? 0) - second, start, end: cursor };
  });
}

interface Tagged {
  label: string;
  score: number;
  start: number;
  end: number;
}

function tagOf(label: string): { begin: boolean; tag: string } {
  if (label.startsWith('B-')) return { begin: true, tag: label.slice(2) };
  if (label.startsWith('I-')) return { begin: false, tag: label.slice(2) };
  return { begin: false, tag: label };
}

/** The pipeline's group_entities: join while the tag is unchanged and the new item is not B-. */
function group(text: string, items: readonly Tagged[]): Entity[] {
  const groups: Tagged[][] = [];
  for (const item of items) {
    const current = groups[groups.length - 1];
    const last = current?.[current.length - 1];
    if (current !== undefined && last !== undefined && !tagOf(item.label).begin && tagOf(item.label).tag === tagOf(last.label).tag) current.push(item);
    else groups.push([item]);
  }
  return groups
    .map((members): Entity => {
      const start = members[0]?.start ?? 0;
      const end = members[members.length - 1]?.end ?? 0;
      const score = members.reduce((sum, m) => sum + m.score, 0) / members.length;
      return { text: text.slice(start, end), label: tagOf(members[0]?.label ?? 'O').tag, score, start, end };
    })
    .filter((entity) => entity.label !== 'O');
}

function expectedEntities(kase: Case, strategy: 'none' | 'simple' | 'first'): Entity[] {
  const tokens = predictions(kase);
  if (strategy === 'none') {
    return tokens
      .filter((p) => p.label !== 'O')
      .map((p) => ({ text: kase.text.slice(p.start, p.end), label: p.label, score: p.score, start: p.start, end: p.end }));
  }
  if (strategy === 'simple') return group(kase.text, tokens);
  // 'first': a word is a token plus its ## continuations; it takes its first token's label and score.
  const words: Tagged[] = [];
  for (const p of tokens) {
    const previous = words[words.length - 1];
    if (previous !== undefined && p.token.startsWith('##')) previous.end = p.end;
    else words.push({ label: p.label, score: p.score, start: p.start, end: p.end });
  }
  return group(kase.text, words);
}

function expectEntities(actual: Entity[] | undefined, expected: Entity[], label: string): void {
  expect(actual?.map(({ score: _score, ...rest }) => rest), label).toEqual(expected.map(({ score: _score, ...rest }) => rest));
  actual?.forEach((entity, i) => expect(Math.abs(entity.score - (expected[i]?.score ?? Number.NaN)), `${label}[${i}] score`).toBeLessThanOrEqual(ATOL));
}

let engine: InferenceEngine;
beforeAll(() => {
  engine = new InferenceEngine();
});
afterAll(async () => {
  await engine.close();
});

describe('token-classification family: tiny-ner', () => {
  it('the fixture cases are unambiguous and exercise grouping', () => {
    const all = CASES.flatMap(predictions);
    expect(Math.min(...all.map((p) => p.margin))).toBeGreaterThan(1e-3);
    const simple = CASES.flatMap((c) => expectedEntities(c, 'simple'));
    expect(simple.some((e) => e.text === 'Alice Smith' && e.label === 'PER')).toBe(true);
    expect(CASES.some((c) => JSON.stringify(expectedEntities(c, 'simple')) !== JSON.stringify(expectedEntities(c, 'first')))).toBe(true);
  });

  it('is detected with the id2label labels', async () => {
    const profile = await engine.profile(model.dir);
    expect(profile.family).toBe('token-classification');
    expect(profile.options).toMatchObject({ labels: LABELS });
  });

  for (const strategy of ['simple', 'first', 'none'] as const) {
    it(`aggregates '${strategy}' as the Hugging Face pipeline does, offsets into the original text`, async () => {
      for (const kase of CASES) {
        const result = await engine.extract({ model: model.dir, items: [kase.text], aggregation: strategy });
        expectEntities(result.items[0]?.entities, expectedEntities(kase, strategy), `${strategy}: ${kase.text}`);
      }
    });
  }

  it('gives each text of a padded batch its own entities', async () => {
    const result = await engine.extract({ model: model.dir, items: CASES.map((c) => c.text), aggregation: 'simple' });
    expect(result.items.map((item) => item.index)).toEqual(CASES.map((_, i) => i));
    CASES.forEach((kase, i) => expectEntities(result.items[i]?.entities, expectedEntities(kase, 'simple'), `batch item ${i}`));
  });

  it('drops entities scoring below the threshold', async () => {
    const kase = CASES[0];
    if (kase === undefined) throw new Error('no case');
    const all = expectedEntities(kase, 'simple');
    const scores = all.map((e) => e.score).sort((a, b) => a - b);
    // Halfway between two scores, so exactly the better part survives.
    const threshold = ((scores[0] ?? 0) + (scores[1] ?? 1)) / 2;
    const result = await engine.extract({ model: model.dir, items: [kase.text], aggregation: 'simple', threshold });
    expectEntities(result.items[0]?.entities, all.filter((e) => e.score >= threshold), 'threshold');
    expect(result.items[0]?.entities?.length).toBe(all.length - 1);
  });
});
