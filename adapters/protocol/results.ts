import { z } from 'zod';
import type { EmbeddingDtype, TypedVector } from './output-types.js';
import { ItemId } from './requests.js';

/**
 * Result schemas of the primitives. One documented shape for every family:
 * dense `number[]`, sparse `{indices, values}`, multivector `number[][]`, scores
 * `{index, score}` sorted by score, entities `{text, label, score, start, end}`.
 */

export const SparseVector = z.strictObject({
  /** Vocabulary ids, ascending. */
  indices: z.array(z.number().int().nonnegative()),
  values: z.array(z.number()),
});
export type SparseVector = z.infer<typeof SparseVector>;

export const Usage = z.strictObject({
  /** Items processed. */
  items: z.number().int().nonnegative(),
  /** Real (unpadded) tokens fed to the model, special tokens included. */
  tokens: z.number().int().nonnegative(),
});
export type Usage = z.infer<typeof Usage>;

export const EncodedItem = z.strictObject({
  index: z.number().int().nonnegative(),
  id: ItemId.optional(),
  dense: z.array(z.number()).optional(),
  sparse: SparseVector.optional(),
  multivector: z.array(z.array(z.number())).optional(),
  /** True when the input was cut to the model's maximum length. */
  truncated: z.boolean().optional(),
  /**
   * The item's input text, only in the results of a job whose target is an index (its rows store
   * the text, docs/storage.md); absent everywhere else, and for image items.
   */
  text: z.string().optional(),
});
export type EncodedItem = z.infer<typeof EncodedItem>;

export const EncodeResult = z.strictObject({
  model: z.string(),
  items: z.array(EncodedItem),
  usage: Usage,
});
export type EncodeResult = z.infer<typeof EncodeResult>;

/**
 * An encoded item whose dense vector is still a typed array: what an in-process caller gets from
 * `Engine.encodeTyped`, so vectors stay typed from the model thread to the store (no number[]).
 */
export type TypedEncodedItem = Omit<EncodedItem, 'dense'> & { dense?: TypedVector };

export interface TypedEncodeResult extends Omit<EncodeResult, 'items'> {
  dtype: EmbeddingDtype;
  items: TypedEncodedItem[];
}

export const ScoredItem = z.strictObject({
  /** Position of the item in the request. */
  index: z.number().int().nonnegative(),
  id: ItemId.optional(),
  score: z.number(),
});
export type ScoredItem = z.infer<typeof ScoredItem>;

export const ScoreResult = z.strictObject({
  model: z.string(),
  /** Sorted by descending score; ties keep request order. */
  scores: z.array(ScoredItem),
  usage: Usage,
});
export type ScoreResult = z.infer<typeof ScoreResult>;

export const Entity = z.strictObject({
  /** The exact characters `input.slice(start, end)`. */
  text: z.string(),
  label: z.string(),
  score: z.number(),
  /** Character offsets (UTF-16 code units, as JavaScript strings index) into the input text, [start, end). */
  start: z.number().int().nonnegative(),
  end: z.number().int().nonnegative(),
});
export type Entity = z.infer<typeof Entity>;

export const LabelScore = z.strictObject({
  label: z.string(),
  score: z.number(),
});
export type LabelScore = z.infer<typeof LabelScore>;

/** A line of text found in an image (OCR), with its quadrilateral in image pixel coordinates. */
export const OcrLine = z.strictObject({
  text: z.string(),
  score: z.number(),
  /** Corners clockwise from top-left: [[x, y] × 4]. */
  box: z.array(z.tuple([z.number(), z.number()])).length(4),
});
export type OcrLine = z.infer<typeof OcrLine>;

export const ExtractedItem = z.strictObject({
  index: z.number().int().nonnegative(),
  id: ItemId.optional(),
  entities: z.array(Entity).optional(),
  /** Classifier labels, best first. */
  labels: z.array(LabelScore).optional(),
  /** Text extracted from a document or image (OCR: the page text in reading order). */
  text: z.string().optional(),
  /** OCR lines in reading order. */
  lines: z.array(OcrLine).optional(),
});
export type ExtractedItem = z.infer<typeof ExtractedItem>;

export const ExtractResult = z.strictObject({
  model: z.string(),
  items: z.array(ExtractedItem),
  usage: Usage,
});
export type ExtractResult = z.infer<typeof ExtractResult>;

export const TokenizedItem = z.strictObject({
  index: z.number().int().nonnegative(),
  id: ItemId.optional(),
  ids: z.array(z.number().int()),
  tokens: z.array(z.string()),
  truncated: z.boolean(),
  /** Token count before truncation. */
  length: z.number().int().nonnegative(),
});
export type TokenizedItem = z.infer<typeof TokenizedItem>;

export const TokenizeResult = z.strictObject({
  model: z.string(),
  items: z.array(TokenizedItem),
});
export type TokenizeResult = z.infer<typeof TokenizeResult>;
