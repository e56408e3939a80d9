import { z } from 'zod';
import { DEFAULT_LIMITS } from './limits.js';
import { EntityOffsets } from './entity-offsets.js';
import { Dimensions, EmbeddingDtype } from './output-types.js';

/**
 * Wire schemas of the three primitives (plus tokenize). Shared by the in-process engine, the CLI,
 * the HTTP gateway and NATS messages, so every entry point validates the same way.
 */

export const OutputType = z.enum(['dense', 'sparse', 'multivector']);
export type OutputType = z.infer<typeof OutputType>;

/** Which side of a retrieval pair a text is: picks the model's query/document prompt and encoding. */
export const Role = z.enum(['query', 'document']);
export type Role = z.infer<typeof Role>;

export const Aggregation = z.enum(['simple', 'first', 'none']);
export type Aggregation = z.infer<typeof Aggregation>;

export const ItemId = z.union([z.string().max(DEFAULT_LIMITS.maxIdChars), z.number().finite()], {
  // zod's own word for a failed union is "Invalid input", which names neither type nor limit.
  error: `must be a string of at most ${DEFAULT_LIMITS.maxIdChars} characters or a finite number`,
});
export type ItemId = z.infer<typeof ItemId>;

export const ModelRef = z
  .string()
  .min(1, 'model is required')
  .max(1024)
  .refine((value) => !value.includes('\0'), 'model must not contain NUL bytes');

const Text = z.string().max(DEFAULT_LIMITS.maxTextChars, `text longer than ${DEFAULT_LIMITS.maxTextChars} characters`);

export const TextItem = z.strictObject({
  id: ItemId.optional(),
  text: Text,
  role: Role.optional(),
});
export type TextItem = z.infer<typeof TextItem>;

/** Base64 of the largest allowed image. */
const MAX_IMAGE_BASE64 = Math.ceil((DEFAULT_LIMITS.maxImageBytes * 4) / 3) + 64;

/**
 * An image: a local path (inside the configured image roots) or an http(s) URL (allowed hosts only)
 * as a string or `{path}` / `{url}`, inline data as `{base64}` or a `data:image/...;base64,` string,
 * or raw bytes (in-process callers and binary NATS payloads).
 */
export const ImageSource = z.union([
  // Bytes (any Uint8Array, Buffer included) first: the strict-object checks below would enumerate
  // every index of a Uint8Array as an unknown key (12 MB took zod 38 s); a union stops at the first match.
  z.custom<Uint8Array>((value) => value instanceof Uint8Array, 'expected image bytes (a Uint8Array)'),
  z.string().min(1).max(MAX_IMAGE_BASE64),
  z.strictObject({ path: z.string().min(1).max(4096) }),
  z.strictObject({ url: z.string().min(1).max(8192) }),
  z.strictObject({ base64: z.string().min(1).max(MAX_IMAGE_BASE64) }),
]);
export type ImageSource = z.infer<typeof ImageSource>;

export const ImageItem = z.strictObject({
  id: ItemId.optional(),
  image: ImageSource,
  role: Role.optional(),
});
export type ImageItem = z.infer<typeof ImageItem>;

export type Item = TextItem | ImageItem;

export function isImageItem(item: Item): item is ImageItem {
  return 'image' in item;
}

/** A bare string is accepted wherever an item is, as shorthand for `{text}`. */
const ItemInput = z.union([Text, TextItem, ImageItem]).transform((value): Item =>
  typeof value === 'string' ? { text: value } : value,
);

const Items = z
  .array(ItemInput)
  .min(1, 'items must not be empty')
  .max(DEFAULT_LIMITS.maxItemsPerRequest, `at most ${DEFAULT_LIMITS.maxItemsPerRequest} items per request`);

const MaxLength = z.number().int().min(1).max(DEFAULT_LIMITS.maxSequenceLength);
const PromptText = z.string().max(DEFAULT_LIMITS.maxPromptChars);

export const Priority = z.enum(['interactive', 'bulk']);
export type Priority = z.infer<typeof Priority>;

const Common = {
  model: ModelRef,
  /** Override the model's maximum sequence length (tokens, special tokens included). */
  max_length: MaxLength.optional(),
  /** Scheduling lane: interactive requests go into the very next batch. */
  priority: Priority.optional(),
};

export const EncodeRequest = z.strictObject({
  ...Common,
  items: Items,
  /** Which representations to return; defaults to the model's native output. */
  output_types: z.array(OutputType).min(1).max(3).optional(),
  /** Default role of items that do not carry their own. */
  role: Role.optional(),
  /** Name of a prompt from the model's prompts (config_sentence_transformers.json or catalog). */
  prompt: z.string().max(DEFAULT_LIMITS.maxLabelChars).optional(),
  /** Literal text prepended to every item, instead of a named prompt. */
  prompt_text: PromptText.optional(),
  /** Task description filled into the model's instruction template (e.g. Qwen3/E5-instruct). */
  instruction: PromptText.optional(),
  /** L2-normalize dense vectors; defaults to what the model's own configuration says. */
  normalize: z.boolean().optional(),
  /** Output type of dense vectors (output-types.ts): float32 (default), float16, int8, uint8, binary, ubinary. */
  dtype: EmbeddingDtype.optional(),
  /** Matryoshka: keep the first N dimensions of dense vectors, normalized again when they were unit length. */
  dimensions: Dimensions.optional(),
});
export type EncodeRequest = z.input<typeof EncodeRequest>;
export type ParsedEncodeRequest = z.output<typeof EncodeRequest>;

export const ScoreRequest = z.strictObject({
  ...Common,
  /** The query: text, or an image (image-to-text search with CLIP-style models). */
  query: z
    .union([Text, z.strictObject({ id: ItemId.optional(), text: Text }), z.strictObject({ id: ItemId.optional(), image: ImageSource })])
    .transform((value): { id?: ItemId | undefined; text: string } | { id?: ItemId | undefined; image: ImageSource } =>
      typeof value === 'string' ? { text: value } : value,
    ),
  items: Items,
  /** Return only the best k scores. */
  top_k: z.number().int().min(1).max(DEFAULT_LIMITS.maxTopK).optional(),
  /** Prompt name applied to the query when the model scores by embeddings. */
  prompt: z.string().max(DEFAULT_LIMITS.maxLabelChars).optional(),
  instruction: PromptText.optional(),
});
export type ScoreRequest = z.input<typeof ScoreRequest>;
export type ParsedScoreRequest = z.output<typeof ScoreRequest>;

export const ExtractRequest = z.strictObject({
  ...Common,
  items: Items,
  /** Entity types for zero-shot extractors (GLiNER); ignored by fixed-label models. */
  labels: z
    .array(z.string().min(1).max(DEFAULT_LIMITS.maxLabelChars))
    .min(1)
    .max(DEFAULT_LIMITS.maxLabels)
    .optional(),
  /** Minimum score of a returned entity or label. */
  threshold: z.number().min(0).max(1).optional(),
  /** How token predictions are merged into entities (token classification). */
  aggregation: Aggregation.optional(),
  /** Return only the best k labels (classifiers). */
  top_k: z.number().int().min(1).max(1000).optional(),
  /** What entity start/end count: `utf16` code units (default, JavaScript) or `codepoint`s (Python). */
  offsets: EntityOffsets.optional(),
});
export type ExtractRequest = z.input<typeof ExtractRequest>;
export type ParsedExtractRequest = z.output<typeof ExtractRequest>;

/** A tokenize item may carry a second segment: the model's pair template and pair truncation apply. */
export const TokenizeItem = TextItem.extend({ pair: Text.optional() });
export type TokenizeItem = z.infer<typeof TokenizeItem>;

const TokenizeItems = z
  .array(z.union([Text, TokenizeItem]).transform((value): TokenizeItem => (typeof value === 'string' ? { text: value } : value)))
  .min(1, 'items must not be empty')
  .max(DEFAULT_LIMITS.maxItemsPerRequest, `at most ${DEFAULT_LIMITS.maxItemsPerRequest} items per request`);

export const TokenizeRequest = z.strictObject({
  ...Common,
  items: TokenizeItems,
  role: Role.optional(),
  prompt: z.string().max(DEFAULT_LIMITS.maxLabelChars).optional(),
  prompt_text: PromptText.optional(),
  instruction: PromptText.optional(),
});
export type TokenizeRequest = z.input<typeof TokenizeRequest>;
export type ParsedTokenizeRequest = z.output<typeof TokenizeRequest>;
