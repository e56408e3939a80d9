import type { OutputType } from '../protocol/requests.js';
import type { HfConfig, ModelFolder, StModule } from './model-files.js';

/**
 * The light half of a model family: what it can do and how it recognizes a model folder. The
 * registry imports every family's spec (detection and capability checks run on the main thread
 * and in prep threads), so a spec imports no runtime, tokenizer or image code; the heavy half
 * (family.ts FamilyAdapter: detectOptions, prepare, createRunner) is loaded on demand.
 */

export type InputKind = 'text' | 'image';

export interface Capabilities {
  /** What items the family reads; default ['text']. */
  inputs?: readonly InputKind[];
  /** Representations `encode` can return. */
  encode: readonly OutputType[];
  /** What `encode` returns when the request names none. */
  defaultOutputs: readonly OutputType[];
  /** `pairs`: the model scores (query, item) pairs itself; `embeddings`: similarity of encodings. */
  score: 'pairs' | 'embeddings' | null;
  /** The pair prompt has a place for a request's `instruction` (PrepItem.instruction), instead of an instruction template. */
  pairInstruction?: boolean;
  extract: boolean;
}

/** What detection sees of a model folder. */
export interface Evidence {
  /** The name the model is asked for by (catalog name or reference): some families are told apart by name only. */
  name: string;
  folder: ModelFolder;
  config: HfConfig | undefined;
  modules: StModule[];
  onnx: Record<string, string>;
  /** The catalog's `options` for this model, which win over detected ones (a family may resolve them, e.g. token ids). */
  catalogOptions: Record<string, unknown>;
}

export interface FamilySpec {
  readonly capabilities: Capabilities;
  /** Higher wins; 0 = not this family. Families inspect only the evidence, never load weights. */
  match(evidence: Evidence): number;
  /**
   * Default max_length ceiling when neither the catalog nor sentence_bert_config.json sets one:
   * a model whose tokenizer allows 40,960 tokens per pair would otherwise take that as its default.
   */
  readonly defaultMaxLength?: number;
}
