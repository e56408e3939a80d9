import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { applyTemplate, specialTokenCount, templateFromPostProcessor } from '../../../../adapters/tokenizers/template.js';
import { TextTokenizer } from '../../../../adapters/tokenizers/text-tokenizer.js';
import type { PostProcessorJson } from '../../../../adapters/tokenizers/tokenizer-files.js';
import { FIXTURES_DIR } from '../../../helpers/shared.js';
import { loadTinyModel } from '../../../helpers/tiny-model.js';

/**
 * Special-token templates read from tokenizer.json post_processors: BertProcessing,
 * RobertaProcessing, TemplateProcessing and a Sequence of ByteLevel + TemplateProcessing (the
 * Qwen3-Embedding layout), first on hand-written post_processor objects, then end to end on the
 * fixture tokenizers.
 */

const A = [10, 11, 12];
const B = [20, 21];
const lookup = (token: string): number | undefined => ({ '[CLS]': 101, '[SEP]': 102, '<s>': 0, '</s>': 2, '<|endoftext|>': 9 })[token];

function build(json: PostProcessorJson) {
  const template = templateFromPostProcessor(json, lookup);
  return { template, single: applyTemplate(template, A), pair: applyTemplate(template, A, B) };
}

const bertTemplate: PostProcessorJson = {
  type: 'TemplateProcessing',
  single: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } }],
  pair: [
    { SpecialToken: { id: '[CLS]', type_id: 0 } },
    { Sequence: { id: 'A', type_id: 0 } },
    { SpecialToken: { id: '[SEP]', type_id: 0 } },
    { Sequence: { id: 'B', type_id: 1 } },
    { SpecialToken: { id: '[SEP]', type_id: 1 } },
  ],
  special_tokens: {
    '[CLS]': { id: '[CLS]', ids: [101], tokens: ['[CLS]'] },
    '[SEP]': { id: '[SEP]', ids: [102], tokens: ['[SEP]'] },
  },
};

const endOfText: PostProcessorJson = {
  type: 'TemplateProcessing',
  single: [{ Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '<|endoftext|>', type_id: 0 } }],
  pair: [
    { Sequence: { id: 'A', type_id: 0 } },
    { SpecialToken: { id: '<|endoftext|>', type_id: 0 } },
    { Sequence: { id: 'B', type_id: 1 } },
    { SpecialToken: { id: '<|endoftext|>', type_id: 1 } },
  ],
};

describe('templateFromPostProcessor', () => {
  it('BertProcessing: [CLS] A [SEP] / [CLS] A [SEP] B [SEP] with type ids 0 then 1', () => {
    const { template, single, pair } = build({ type: 'BertProcessing', cls: ['[CLS]', 101], sep: ['[SEP]', 102] });
    expect(single).toEqual({ ids: [101, ...A, 102], typeIds: [0, 0, 0, 0, 0], specialMask: [1, 0, 0, 0, 1] });
    expect(pair.ids).toEqual([101, ...A, 102, ...B, 102]);
    expect(pair.typeIds).toEqual([0, 0, 0, 0, 0, 1, 1, 1]);
    expect(pair.specialMask).toEqual([1, 0, 0, 0, 1, 0, 0, 1]);
    expect([specialTokenCount(template, false), specialTokenCount(template, true)]).toEqual([2, 3]);
  });

  it('RobertaProcessing: <s> A </s></s> B </s>, all type ids 0', () => {
    const { template, single, pair } = build({ type: 'RobertaProcessing', cls: ['<s>', 0], sep: ['</s>', 2] });
    expect(single.ids).toEqual([0, ...A, 2]);
    expect(pair.ids).toEqual([0, ...A, 2, 2, ...B, 2]);
    expect(pair.typeIds.every((t) => t === 0)).toBe(true);
    expect([specialTokenCount(template, false), specialTokenCount(template, true)]).toEqual([2, 4]);
  });

  it('TemplateProcessing: ids from special_tokens, type ids from the template', () => {
    const { single, pair } = build(bertTemplate);
    expect(single.ids).toEqual([101, ...A, 102]);
    expect(pair.typeIds).toEqual([0, 0, 0, 0, 0, 1, 1, 1]);
  });

  it('TemplateProcessing without special_tokens resolves the tokens through the vocabulary', () => {
    const { single, pair } = build(endOfText);
    expect(single).toEqual({ ids: [...A, 9], typeIds: [0, 0, 0, 0], specialMask: [0, 0, 0, 1] });
    expect(pair.ids).toEqual([...A, 9, ...B, 9]);
    expect(pair.typeIds).toEqual([0, 0, 0, 0, 1, 1, 1]);
  });

  it('Sequence of ByteLevel and TemplateProcessing: the template is found inside', () => {
    const { single } = build({ type: 'Sequence', processors: [{ type: 'ByteLevel' }, endOfText] });
    expect(single.ids).toEqual([...A, 9]);
  });

  it('ByteLevel alone or no post_processor adds nothing', () => {
    expect(build({ type: 'ByteLevel' }).pair.ids).toEqual([...A, ...B]);
    const none = templateFromPostProcessor(null, lookup);
    expect(applyTemplate(none, A, B)).toEqual({ ids: [...A, ...B], typeIds: [0, 0, 0, 1, 1], specialMask: [0, 0, 0, 0, 0] });
  });

  it('a template naming a token outside the vocabulary is a load error', () => {
    const broken: PostProcessorJson = { type: 'TemplateProcessing', single: [{ SpecialToken: { id: '<nope>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }] };
    expect(() => templateFromPostProcessor(broken, lookup)).toThrow(expect.objectContaining({ code: 'MODEL_LOAD_FAILED' }));
  });
});

describe('fixture tokenizers end to end', () => {
  const fixture = (name: string): string => join(FIXTURES_DIR, 'models', name);

  it('WordPiece with TemplateProcessing (BERT layout)', async () => {
    const model = loadTinyModel('tiny-cross-encoder');
    const tokenizer = await TextTokenizer.load(fixture('tiny-cross-encoder'));
    const encoded = tokenizer.encode('the cat', { maxLength: 32, pair: 'a dog runs' });
    expect(encoded.ids).toEqual(model.ids(['[CLS]', 'the', 'cat', '[SEP]', 'a', 'dog', 'runs', '[SEP]']));
    expect(encoded.typeIds).toEqual([0, 0, 0, 0, 1, 1, 1, 1]);
    expect(encoded.specialMask).toEqual([1, 0, 0, 1, 0, 0, 0, 1]);
  });

  it('byte-level BPE with RobertaProcessing (RoBERTa layout)', async () => {
    const model = loadTinyModel('tiny-roberta-mean');
    const tokenizer = await TextTokenizer.load(fixture('tiny-roberta-mean'));
    const encoded = tokenizer.encode('The cat', { maxLength: 32, pair: 'the river' });
    expect(encoded.ids).toEqual(model.ids(['<s>', 'The', 'Ġcat', '</s>', '</s>', 'the', 'Ġriver', '</s>']));
    expect(encoded.typeIds.every((t) => t === 0)).toBe(true);
    expect(tokenizer.specialCount(true)).toBe(4);
  });

  it('byte-level BPE with ByteLevel + TemplateProcessing (Qwen3-Embedding layout)', async () => {
    const model = loadTinyModel('tiny-decoder-last');
    const tokenizer = await TextTokenizer.load(fixture('tiny-decoder-last'));
    expect(tokenizer.encode('The cat', { maxLength: 32 }).ids).toEqual(model.ids(['The', 'Ġcat', '<|endoftext|>']));
    const pair = tokenizer.encode('The cat', { maxLength: 32, pair: 'dogs' });
    expect(pair.ids).toEqual(model.ids(['The', 'Ġcat', '<|endoftext|>', 'dogs', '<|endoftext|>']));
    expect(pair.typeIds).toEqual([0, 0, 0, 1, 1]);
    expect(tokenizer.info).toMatchObject({ padId: model.id('<|endoftext|>'), paddingSide: 'left', unkToken: null });
  });
});
