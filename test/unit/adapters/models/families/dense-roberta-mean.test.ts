import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InferenceEngine } from '../../../../../pipelines/inference/engine.js';
import { expectAllClose } from '../../../../helpers/conformance.js';
import { arange, l2Normalize, loadTinyModel, maxAbsDiff, meanPool, tokenOutputs } from '../../../../helpers/tiny-model.js';

/**
 * Dense family on a RoBERTa-style model (fixture tiny-roberta-mean: byte-level BPE with
 * RobertaProcessing, model_type roberta, pad_token_id 1, position_ids as a graph input). RoBERTa
 * counts positions from padding_idx + 1 and gives [PAD] the position padding_idx; its 34 position
 * embeddings leave room for 32 tokens, which caps the max_seq_length of 40.
 */

const model = loadTinyModel('tiny-roberta-mean');
const ATOL = 2e-5;
const PADDING_IDX = 1;
const wrap = (...tokens: string[]): string[] => ['<s>', ...tokens, '</s>'];

function embedding(tokens: readonly string[], positions = arange(tokens.length, PADDING_IDX + 1)): number[] {
  return l2Normalize(meanPool(tokenOutputs(model, { ids: model.ids(tokens), positions })));
}

const TEXTS = [
  { text: 'The cat sat on the mat', tokens: wrap('The', 'Ġcat', 'Ġsat', 'Ġon', 'Ġthe', 'Ġmat') },
  { text: 'dogs and cats', tokens: wrap('dogs', 'Ġand', 'Ġcats') },
  { text: 'fish', tokens: wrap('fish') },
];

let engine: InferenceEngine;
beforeAll(() => {
  engine = new InferenceEngine();
});
afterAll(async () => {
  await engine.close();
});

describe('dense family: tiny-roberta-mean', () => {
  it('is detected with the RoBERTa position rule and a length capped by the position table', async () => {
    const profile = await engine.profile(model.dir);
    expect(profile.family).toBe('dense');
    expect(profile.positionRule).toBe('roberta');
    expect(profile.padTokenId).toBe(PADDING_IDX);
    expect(profile.hardMaxLength).toBe(32);
    expect(profile.maxLength).toBe(32);
    expect(profile.tokenizer).toMatchObject({ padId: model.id('<pad>'), paddingSide: 'right' });
  });

  it('wraps texts in <s> … </s>', async () => {
    const result = await engine.tokenize({ model: model.dir, items: TEXTS.map((t) => t.text) });
    expect(result.items.map((i) => i.tokens)).toEqual(TEXTS.map((t) => t.tokens));
  });

  it('feeds position ids from padding_idx + 1, in a padded batch too', async () => {
    const alone = await engine.encode({ model: model.dir, items: [TEXTS[2]?.text ?? ''] });
    expectAllClose(alone.items[0]?.dense ?? [], embedding(TEXTS[2]?.tokens ?? []), ATOL, 'alone');
    const batch = await engine.encode({ model: model.dir, items: TEXTS.map((t) => t.text) });
    TEXTS.forEach((t, i) => expectAllClose(batch.items[i]?.dense ?? [], embedding(t.tokens), ATOL, JSON.stringify(t.text)));
    // BERT's arange positions would give another vector even without padding.
    const tokens = TEXTS[2]?.tokens ?? [];
    expect(maxAbsDiff(embedding(tokens, arange(tokens.length)), embedding(tokens))).toBeGreaterThan(1e-2);
  });

  it('cuts long texts to the 32 tokens the position table allows', async () => {
    const text = Array.from({ length: 20 }, () => 'the cat').join(' ');
    const words = ['the', 'Ġcat', ...Array.from({ length: 19 }, () => ['Ġthe', 'Ġcat']).flat()];
    const kept = wrap(...words.slice(0, 30));
    const tokenized = await engine.tokenize({ model: model.dir, items: [text] });
    expect(tokenized.items[0]).toMatchObject({ tokens: kept, truncated: true, length: 42 });
    const result = await engine.encode({ model: model.dir, items: [text] });
    expectAllClose(result.items[0]?.dense ?? [], embedding(kept), ATOL, 'truncated');
  });

  it('rejects a request max_length beyond the position table with INVALID_INPUT', async () => {
    await expect(engine.encode({ model: model.dir, items: ['fish'], max_length: 33 })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
  });
});
