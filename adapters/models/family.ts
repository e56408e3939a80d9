import { ErrorCode, ShoalError } from '../protocol/errors.js';
import type { Aggregation, OutputType, Role } from '../protocol/requests.js';
import type { Entity, LabelScore, OcrLine, SparseVector } from '../protocol/results.js';
import type { GraphRewrite } from '../quantize/derived-graph.js';
import type { ImageInput } from '../sources/image-input.js';
import type { CreatedSession } from '../runtime/ort-session.js';
import type { RuntimeOptions } from '../runtime/runtime-options.js';
import type { Span } from '../tokenizers/offsets.js';
import type { TextTokenizer } from '../tokenizers/text-tokenizer.js';
import type { Evidence, FamilySpec } from './family-spec.js';
import type { PrecisionInfo } from './precision/precision-info.js';
import type { Family, ModelProfile } from './profile.js';

/**
 * The one interface every model family implements. A family runs in two places:
 * `prepare` in a prep thread (tokenization and other input work, producing plain data whose
 * `cost` the scheduler batches by) and a Runner in the model's own thread (collate, run the ONNX
 * session, post-process). Both sides receive the same ModelProfile.
 */

export type Task = 'encode' | 'score' | 'extract' | 'tokenize';

export interface PrepItem {
  /** The text, or '' for an image item. */
  text: string;
  /** An image item (already checked against the image policy); families that read images load it. */
  image?: ImageInput;
  /** Second segment, for pair scoring. */
  pair?: string;
  role: Role;
  /** Prompt text prepended by the engine (already included in `text`); kept for include_prompt=false pooling. */
  prompt?: string;
  /** Task instruction of a pair-scoring request, for families whose prompt has a place for it (causal-LM rerankers). */
  instruction?: string;
}

export interface PrepareRequest {
  task: Task;
  items: PrepItem[];
  /** Effective maximum length (request override or the profile's). */
  maxLength: number;
  /** Zero-shot labels (GLiNER). */
  labels?: string[];
  /** Count exact untruncated lengths (tokenize command). */
  exactLength?: boolean;
}

export interface PreparedText {
  kind: 'text';
  ids: number[];
  /** Token type ids; null when all zero. */
  typeIds: number[] | null;
  /** Attention mask when not all ones (ColBERT query [MASK] expansion). */
  attention: number[] | null;
  truncated: boolean;
  /** Length before truncation, special tokens included. */
  length: number;
  /** Number of leading prompt tokens (after the first special token) for include_prompt=false pooling. */
  promptTokens: number;
  role: Role;
  /** Token strings and original-text offsets, for families that report spans. */
  tokens?: string[];
  offsets?: Span[];
  text?: string;
  /** Set when `ids` is longer than one model pass: the runner reads it in overlapping windows of this many tokens (special tokens included). */
  windowLength?: number;
}

/** A run of consecutive words GLiNER reads in one sequence: [CLS] prompt words [SEP]. */
export interface GlinerWindow {
  /** [start, end) of the window's positions in the item's `ids` and `wordsMask`. */
  tokens: Span;
  /** Index in `words` of the window's first word. */
  firstWord: number;
  wordCount: number;
}

export interface PreparedGliner {
  kind: 'gliner';
  /** Token ids of every window, one window after another (a text longer than the model reads spans several). */
  ids: number[];
  /** Per window: 1-based index of the window word whose first sub-token is at each position, else 0. */
  wordsMask: number[];
  windows: GlinerWindow[];
  /** Character span of each text word. */
  words: Span[];
  text: string;
  labels: string[];
  truncated: boolean;
  length: number;
}

/** A decoded, preprocessed image: pixel tensor in the layout the vision graph takes. */
export interface PreparedImage {
  kind: 'image';
  /** Row-major tensor data, e.g. [3, 224, 224] float32 for CLIP/ImageNet models. */
  pixels: Float32Array;
  dims: number[];
  /** Size of the decoded image before preprocessing (OCR maps boxes back to it). */
  width: number;
  height: number;
  /** What the scheduler charges for this image, in token units (e.g. ViT patches + 1). */
  cost: number;
  role: Role;
  /** The decoded image itself (interleaved RGB, width × height), for families that crop it after inference (OCR). */
  rgb?: Uint8Array;
}

export type Prepared = PreparedText | PreparedGliner | PreparedImage;

/** Tokens the scheduler charges for an item before padding. */
export function preparedCost(item: Prepared): number {
  return item.kind === 'image' ? item.cost : item.ids.length;
}

export interface RunOptions {
  outputs: OutputType[];
  normalize?: boolean;
  threshold?: number;
  aggregation?: Aggregation;
  topK?: number;
}

export interface ItemOutput {
  /** Its own ArrayBuffer (never a view into a batch tensor): the model thread transfers it. */
  dense?: Float32Array;
  sparse?: SparseVector;
  multivector?: number[][];
  score?: number;
  entities?: Entity[];
  labels?: LabelScore[];
  text?: string;
  lines?: OcrLine[];
}

export interface PrepContext {
  profile: ModelProfile;
  /** The model's tokenizer; null for families that read no text (capabilities.inputs). */
  tokenizer: TextTokenizer | null;
  /** Reads the bytes of an image item (file, URL or inline data), within the image limits. */
  readImage(image: ImageInput): Promise<Uint8Array>;
  /** Decoded pixels (width × height) one image may have: the image policy's maxPixels. */
  maxImagePixels?: number;
}

/** An image reader for contexts that never read images (text-only tools and tests). */
export function noImageReader(): Promise<Uint8Array> {
  return Promise.reject(new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'this context reads no images'));
}

/** The tokenizer of a text family: a model folder without tokenizer.json cannot run one. */
export function requireTokenizer(tokenizer: TextTokenizer | null, model: string): TextTokenizer {
  if (tokenizer === null) {
    throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${model}: this model family reads text but the model has no tokenizer.json`);
  }
  return tokenizer;
}

export interface RunnerContext {
  profile: ModelProfile;
  runtime: RuntimeOptions;
  /**
   * Opens the ONNX graph of a component of the profile (`model`, `text_model`...). With `rewrite`,
   * the session runs a rewritten copy of the graph (built once, cached beside the int8 graphs),
   * and the profile's precision applies to that copy.
   */
  openSession(component: string, rewrite?: GraphRewrite<unknown>): Promise<CreatedSession>;
}

export interface RunnerInfo {
  provider: string;
  inputs: string[];
  outputs: string[];
  /** Output dimension of the main representation, when known. */
  dimension: number | null;
  /** Precision each ONNX component runs in, and why (set by the model thread, see precision.ts). */
  precision?: Record<string, PrecisionInfo>;
}

export interface Runner {
  readonly info: RunnerInfo;
  run(batch: Prepared[], options: RunOptions): Promise<ItemOutput[]>;
  release(): Promise<void>;
}

/**
 * A family's full adapter: its spec (family-spec.ts) plus detection of its options, input
 * preparation (prep thread) and its runner (model thread). `N` is the family's registry key:
 * family-loaders.ts checks, at compile time, that each loaded adapter carries its own key.
 */
export interface FamilyAdapter<N extends Family = Family> extends FamilySpec {
  readonly name: N;
  /** Family options detected from the folder (validated later by the family itself). */
  detectOptions(evidence: Evidence, tokenizer: TextTokenizer | null): Promise<Record<string, unknown>>;
  prepare(context: PrepContext, request: PrepareRequest): Prepared[] | Promise<Prepared[]>;
  createRunner(context: RunnerContext): Promise<Runner>;
}
