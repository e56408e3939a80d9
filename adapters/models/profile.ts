import { z } from 'zod';
import { RuntimeOverrides } from '../runtime/runtime-options.js';
import { QuantizationOverrides, QuantizationSettings } from '../quantize/settings.js';
import { PastInput } from './kv-cache.js';
import { FAMILY_NAMES } from './registry.js';

/**
 * A model profile: everything Shoal needs to run a model, detected from the model's own files
 * and overridable per model in the catalog. Common facts live here; each family validates its
 * own `options` with the schema in its adapter file.
 */

/** The families of registry.ts, whose table is the one list of them. */
export const Family = z.enum(FAMILY_NAMES);
export type Family = z.infer<typeof Family>;

export const Precision = z.enum(['fp32', 'int8', 'auto', 'q4']);
export type Precision = z.infer<typeof Precision>;

/** How position ids are computed when the graph asks for them. */
export const PositionRule = z.enum(['arange', 'roberta', 'cumsum']);
export type PositionRule = z.infer<typeof PositionRule>;

export const TokenizerFacts = z.strictObject({
  padId: z.number().int(),
  paddingSide: z.enum(['left', 'right']),
  truncationSide: z.enum(['left', 'right']),
  /** sentence-transformers `do_lower_case`: lower-case texts before tokenizing. */
  lowercase: z.boolean(),
});
export type TokenizerFacts = z.infer<typeof TokenizerFacts>;

export const ModelProfile = z.strictObject({
  /** The name callers use (catalog name or model reference). */
  id: z.string(),
  /** Local folder holding the model files. */
  dir: z.string(),
  family: Family,
  architecture: z.string().nullable(),
  modelType: z.string().nullable(),
  /** ONNX graph per component, relative to `dir` ({model} or {text_model, vision_model}...). */
  onnx: z.record(z.string(), z.string()),
  /** Default maximum sequence length in tokens, special tokens included. */
  maxLength: z.number().int().positive(),
  /** The most the model's position embeddings allow; requests may not exceed it. */
  hardMaxLength: z.number().int().positive().nullable(),
  tokenizer: TokenizerFacts.nullable(),
  positionRule: PositionRule,
  /** Network sizes from config.json, for memory estimates (null when not declared). */
  dims: z.strictObject({
    hidden: z.number().int().positive().nullable(),
    heads: z.number().int().positive().nullable(),
    layers: z.number().int().positive().nullable(),
    vocab: z.number().int().positive().nullable(),
  }),
  /** KV-cache inputs of the main graph, fed empty (kv-cache.ts); [] for graphs without a cache. */
  pastInputs: z.array(PastInput).default([]),
  /** config.json pad_token_id (RoBERTa-style position ids count from it). */
  padTokenId: z.number().int().nullable(),
  /** Named prompts (config_sentence_transformers.json or catalog). */
  prompts: z.record(z.string(), z.string()),
  /** Prompt applied when a request names none. */
  defaultPrompt: z.string().nullable(),
  /** Prompt name used for each role when the request names none. */
  rolePrompts: z.strictObject({ query: z.string().optional(), document: z.string().optional() }),
  /** Template with `{instruction}`, used when a request carries an instruction. */
  instructionTemplate: z.string().nullable(),
  precision: Precision,
  /** int8 settings: fidelity floor and smallest weight quantized (adapters/quantize/settings.ts). */
  quantization: QuantizationSettings,
  /** Catalog memory override for the pool (see ProfileOverrides.memory). */
  memory: z.strictObject({ bytes: z.number().int().positive().optional(), factor: z.number().positive().optional() }),
  /** Runtime options for this model (providers, threads), over the engine's defaults. */
  runtime: RuntimeOverrides,
  /** Family-specific options, validated by the family adapter. */
  options: z.record(z.string(), z.unknown()),
  /** What was detected from which file: shown by `shoal models inspect`. */
  evidence: z.array(z.string()),
});
export type ModelProfile = z.infer<typeof ModelProfile>;

/** Catalog-level overrides of a detected profile (all optional; `options` merges key by key). */
export const ProfileOverrides = z.strictObject({
  family: Family.optional(),
  onnx: z.record(z.string(), z.string()).optional(),
  max_length: z.number().int().positive().optional(),
  prompts: z.record(z.string(), z.string()).optional(),
  default_prompt: z.string().nullable().optional(),
  query_prompt: z.string().optional(),
  document_prompt: z.string().optional(),
  instruction_template: z.string().nullable().optional(),
  padding_side: z.enum(['left', 'right']).optional(),
  precision: Precision.optional(),
  quantization: QuantizationOverrides.optional(),
  /** Memory the pool charges for this model: exact bytes, or a factor over its graph files. */
  memory: z.strictObject({ bytes: z.number().int().positive().optional(), factor: z.number().positive().optional() }).optional(),
  runtime: RuntimeOverrides.optional(),
  options: z.record(z.string(), z.unknown()).optional(),
});
export type ProfileOverrides = z.infer<typeof ProfileOverrides>;
