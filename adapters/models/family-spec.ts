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
  extract: boolean;
}

/** What detection sees of a model folder. */
export interface Evidence {
  folder: ModelFolder;
  config: HfConfig | undefined;
  modules: StModule[];
  onnx: Record<string, string>;
}

export interface FamilySpec {
  readonly capabilities: Capabilities;
  /** Higher wins; 0 = not this family. Families inspect only the evidence, never load weights. */
  match(evidence: Evidence): number;
}
