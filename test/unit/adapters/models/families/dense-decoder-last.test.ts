import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InferenceEngine } from '../../../../../pipelines/inference/engine.js';
import { expectAllClose } from '../../../../helpers/conformance.js';
import { arange, l2Normalize, loadTinyModel, maxAbsDiff, tokenOutputs } from '../../../../helpers/tiny-model.js';

/**
 * Dense family, decoder-style last-token pooling (fixture tiny-decoder-last, Qwen3-Embedding
 * layout: byte-level BPE whose template appends <|endoftext|>, left padding, position_ids input
 * with cumsum(mask) - 1, lasttoken pooling, an "Instruct: …\nQuery:" query prompt).
 */

const model = loadTinyModel('tiny-decoder-last');
const ATOL = 2e-5;
const EOT = '<|endoftext|>';

/** Last-token embedding of an unpadded sequence; `positions` overrides 0..n-1 to build wrong variants. */
function lastToken(tokens: readonly string[], positions?: number[]): number[] {
  const outputs = tokenOutputs(model, { ids: model.ids(tokens), ...(positions === undefined ? {} : { positions }) });
  return l2Normalize(outputs[outputs.length - 1] ?? []);
}

const TEXTS = [
  { text: 'The cat sat on the mat', tokens: ['The', 'Ġcat', 'Ġsat', 'Ġon', 'Ġthe', 'Ġmat', EOT] },
  { text: 'dogs', tokens: ['dogs', EOT] },
  { text: 'Where do cats live', tokens: ['Where', 'Ġdo', 'Ġcats', 'Ġlive', EOT] },
  { text: 'a big red house by the river', tokens: ['a', 'Ġbig', 'Ġred', 'Ġhouse', 'Ġby', 'Ġthe', 'Ġriver', EOT] },
];

const INSTRUCTION = 'Given a query, find relevant passages';
const INSTRUCTION_TOKENS = ['Instruct', ':', 'ĠGiven', 'Ġa', 'Ġquery', ',', 'Ġfind', 'Ġrelevant', 'Ġpassages', 'Ċ', 'Query', ':'];

let engine: InferenceEngine;
beforeAll(() => {
  engine = new InferenceEngine();
});
afterAll(async () => {
  await engine.close();
});

describe('dense family: tiny-decoder-last', () => {
  it('is detected as a last-token, left-padded decoder with cumsum position ids and an instruction template', async () => {
    const profile = await engine.profile(model.dir);
    expect(profile.family).toBe('dense');
    expect(profile.options).toMatchObject({ pooling: 'last', normalize: true });
    expect(profile.tokenizer).toMatchObject({ paddingSide: 'left', padId: model.id(EOT) });
    expect(profile.positionRule).toBe('cumsum');
    expect(profile.maxLength).toBe(32);
    expect(profile.instructionTemplate).toBe('Instruct: {instruction}\nQuery:');
    expect(profile.rolePrompts).toEqual({ query: 'query', document: 'document' });
  });

  it('tokenizes byte-level (an emoji is four byte tokens) and appends <|endoftext|>', async () => {
    const items = [...TEXTS.map((t) => t.text), '🙂'];
    const result = await engine.tokenize({ model: model.dir, items });
    expect(result.items.map((i) => i.tokens)).toEqual([...TEXTS.map((t) => t.tokens), ['ð', 'Ł', 'Ļ', 'Ĥ', EOT]]);
  });

  it('embeds a left-padded batch: each row pools its own last token with positions from 0', async () => {
    // Lengths 7, 2, 5, 8: one batch, the short rows padded on the left.
    const result = await engine.encode({ model: model.dir, items: TEXTS.map((t) => t.text) });
    TEXTS.forEach((t, i) => expectAllClose(result.items[i]?.dense ?? [], lastToken(t.tokens), ATOL, JSON.stringify(t.text)));
    // Sharpness: positions counted from the padded row start (arange instead of cumsum) would
    // differ, and so would pooling another token than the last real one.
    const short = TEXTS[1]?.tokens ?? [];
    expect(maxAbsDiff(lastToken(short, arange(short.length, 6)), lastToken(short))).toBeGreaterThan(1e-2);
    const outputs = tokenOutputs(model, { ids: model.ids(short) });
    expect(maxAbsDiff(l2Normalize(outputs[0] ?? []), lastToken(short))).toBeGreaterThan(1e-2);
  });

  it('fills the instruction into the query template', async () => {
    const result = await engine.encode({ model: model.dir, items: ['where do cats live'], instruction: INSTRUCTION });
    const tokens = [...INSTRUCTION_TOKENS, 'where', 'Ġdo', 'Ġcats', 'Ġlive', EOT];
    const tokenized = await engine.tokenize({ model: model.dir, items: ['where do cats live'], instruction: INSTRUCTION });
    expect(tokenized.items[0]?.tokens).toEqual(tokens);
    expectAllClose(result.items[0]?.dense ?? [], lastToken(tokens), ATOL, 'instruction');
    // The named query prompt is the same text.
    const named = await engine.encode({ model: model.dir, items: ['where do cats live'], role: 'query' });
    expectAllClose(named.items[0]?.dense ?? [], lastToken(tokens), ATOL, 'role query');
  });

  it('cuts long texts to max_seq_length and still ends them with <|endoftext|>', async () => {
    const sentence = 'the dog runs in the park';
    const text = Array.from({ length: 8 }, () => sentence).join(' ');
    const tokens = ['the', ...Array.from({ length: 8 }, (_, k) => [...(k === 0 ? [] : ['Ġthe']), 'Ġdog', 'Ġruns', 'Ġin', 'Ġthe', 'Ġpark']).flat()];
    const kept = [...tokens.slice(0, 31), EOT];
    const tokenized = await engine.tokenize({ model: model.dir, items: [text] });
    expect(tokenized.items[0]).toMatchObject({ tokens: kept, truncated: true, length: tokens.length + 1 });
    const result = await engine.encode({ model: model.dir, items: [text, 'dogs'] });
    expect(result.items[0]?.truncated).toBe(true);
    expectAllClose(result.items[0]?.dense ?? [], lastToken(kept), ATOL, 'truncated');
    expectAllClose(result.items[1]?.dense ?? [], lastToken(['dogs', EOT]), ATOL, 'short beside it');
  });
});
