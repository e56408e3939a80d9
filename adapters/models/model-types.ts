import type { ModelProfile, PositionRule } from './profile.js';

/**
 * Facts that follow from config.json's model_type: position-id rules and which models are
 * decoders (last-token pooling, left padding).
 */

const ROBERTA_LIKE = new Set(['roberta', 'xlm-roberta', 'camembert', 'longformer', 'xlm-roberta-xl', 'data2vec-text', 'ibert', 'mpnet']);
const DECODERS = new Set([
  'qwen2',
  'qwen3',
  'llama',
  'mistral',
  'gemma',
  'gemma2',
  'gemma3',
  'gemma3_text',
  'phi',
  'phi3',
  'stablelm',
  'gpt2',
  'gpt_neox',
  'olmo',
]);

export function isDecoderModelType(modelType: string | null): boolean {
  return modelType !== null && DECODERS.has(modelType);
}

export function positionRuleFor(modelType: string | null): PositionRule {
  if (modelType === null) return 'arange';
  if (ROBERTA_LIKE.has(modelType)) return 'roberta';
  if (DECODERS.has(modelType)) return 'cumsum';
  return 'arange';
}

/** RoBERTa-style models reserve padding_idx + 1 positions before the first token. */
export function positionOffsetFor(modelType: string | null): number {
  return modelType !== null && ROBERTA_LIKE.has(modelType) ? 2 : 0;
}

export function positionPadIdx(profile: ModelProfile): number {
  return profile.padTokenId ?? profile.tokenizer?.padId ?? 1;
}
