import type { RuntimeOptions } from '../runtime/runtime-options.js';
import type { ItemOutput, Prepared, PrepareRequest, RunOptions, RunnerInfo } from '../models/family.js';
import type { TuningPoint } from './batch-tuning.js';
import type { ModelProfile, ProfileOverrides } from '../models/profile.js';
import type { ImagePolicy } from '../sources/image-input.js';

/** Messages between the main thread and prep / model threads (discriminated unions, plain data). */

export interface TokenizedOutput {
  ids: number[];
  tokens: string[];
  truncated: boolean;
  length: number;
}

export type PrepRequest =
  /** The image policy of a thread started without one (early-threads.ts); always its first request. */
  | { type: 'configure'; imagePolicy: ImagePolicy }
  | { type: 'describe'; id: string; dir: string; overrides: ProfileOverrides }
  | { type: 'prepare'; profile: ModelProfile; request: PrepareRequest }
  | { type: 'tokenize'; profile: ModelProfile; request: PrepareRequest }
  | { type: 'forget'; dir: string };

export type PrepResponse =
  | { type: 'configured' }
  | { type: 'described'; profile: ModelProfile }
  | { type: 'prepared'; items: Prepared[] }
  | { type: 'tokenized'; items: TokenizedOutput[] }
  | { type: 'forgotten' };

/** Vectors an item is scored against (query side of embedding-based scoring). */
export interface CompareTo {
  dense?: Float32Array;
  sparse?: { indices: number[]; values: number[] };
  multivector?: number[][];
}

export type ModelRequest =
  | { type: 'load'; profile: ModelProfile; runtime: RuntimeOptions }
  | { type: 'run'; batch: Prepared[]; options: RunOptions; compareTo?: CompareTo }
  | { type: 'release' }
  /** Answered once the thread's modules are imported: a spare thread is ready for a load. */
  | { type: 'ping' }
  /** Times the runner at each batch budget on synthetic items of `length` tokens. */
  | { type: 'tune'; budgets: number[]; lengths: number[]; rounds: number };

export type ModelResponse =
  | { type: 'loaded'; info: RunnerInfo; loadMs: number }
  | { type: 'ran'; outputs: ItemOutput[]; runMs: number }
  | { type: 'released' }
  | { type: 'pong' }
  | { type: 'tuned'; points: TuningPoint[] };
