import type { z } from 'zod';
import type { GraphRewrite } from '../../quantize/derived-graph.js';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { parseWith } from '../../protocol/validate.js';
import { describeOutputs, type CreatedSession, type ort } from '../../runtime/ort-session.js';
import { floatOutput, runChecked, type FloatTensor } from '../../runtime/tensors.js';
import type { ItemOutput, Prepared, PreparedText, RunOptions, Runner, RunnerContext, RunnerInfo } from '../family.js';
import { positionPadIdx } from '../model-types.js';
import type { ModelProfile } from '../profile.js';
import { collateOptionsFor, collateText, type CollateOptions, type TextBatch } from './collate.js';

/**
 * The skeleton every single-graph family runs on: pick the graph output → describe it → (text
 * families) collate the batch → run → read the floats. The base classes hold the shared steps;
 * a family subclass supplies only what is its own (which outputs it prefers, how it reads them).
 */

/** How a family finds the graph output it reads. */
export interface OutputChoice {
  /** What the output holds, for the error message ("embeddings", "the MLM logits"). */
  holds: string;
  /** Names tried in order; then the graph's only output. */
  preferred: readonly string[];
  /**
   * `options.output` from the catalog: wins when set. The key is present (even when undefined)
   * exactly for families that have that option, so the error can tell how to set it.
   */
  configured?: string | undefined;
}

/** The output a family reads; MODEL_LOAD_FAILED naming the graph's outputs when none fits. */
export function chooseOutput(profile: Pick<ModelProfile, 'id'>, outputs: readonly string[], choice: OutputChoice): string {
  const configurable = 'configured' in choice;
  const chosen = choice.configured ?? choice.preferred.find((name) => outputs.includes(name)) ?? (outputs.length === 1 ? outputs[0] : undefined);
  if (chosen === undefined || !outputs.includes(chosen)) {
    const hint = configurable ? '; set options.output in the catalog' : '';
    throw new ShoalError(
      ErrorCode.MODEL_LOAD_FAILED,
      `${profile.id}: cannot tell which ONNX output holds ${choice.holds} (outputs: ${outputs.join(', ')})${hint}`,
    );
  }
  return chosen;
}

/** The declared shape of a graph output (numbers, or names of symbolic axes); [] when unknown. */
export function outputShape(session: ort.InferenceSession, output: string): readonly (number | string)[] {
  return describeOutputs(session).find((o) => o.name === output)?.shape ?? [];
}

/** The declared size of an output's last axis, or null when it is symbolic. */
export function lastDimension(session: ort.InferenceSession, output: string): number | null {
  const last = outputShape(session, output).at(-1);
  return typeof last === 'number' ? last : null;
}

function isTextBatch(batch: readonly Prepared[]): batch is PreparedText[] {
  return batch.every((item) => item.kind === 'text');
}

export function requireTextBatch(batch: readonly Prepared[], family: string): PreparedText[] {
  if (!isTextBatch(batch)) throw new ShoalError(ErrorCode.INTERNAL, `${family} received non-text items`);
  return batch;
}

/** A family's options, validated by its own schema (CONFIG_INVALID names the model). */
export function familyOptions<Schema extends z.ZodType>(schema: Schema, profile: Pick<ModelProfile, 'id' | 'options'>, family: string): z.output<Schema> {
  return parseWith(schema, profile.options, `${family} options of ${profile.id}`, ErrorCode.CONFIG_INVALID);
}

/**
 * The default `createRunner` body: open the `model` graph and build the runner on it; when the
 * runner refuses the graph (a missing output, a wrong shape), the session is released before the
 * error propagates, so a refused model holds no native memory.
 */
export async function openRunner(context: RunnerContext, build: (created: CreatedSession) => Runner, rewrite?: GraphRewrite<unknown>): Promise<Runner> {
  const created = await context.openSession('model', rewrite);
  try {
    return build(created);
  } catch (error) {
    await created.session.release();
    throw error;
  }
}

/** One ONNX session and the output the family reads: output choice, `info` and `release`. */
export abstract class SessionRunner implements Runner {
  readonly info: RunnerInfo;
  protected readonly profile: ModelProfile;
  protected readonly session: ort.InferenceSession;
  /** The graph output the family reads. */
  protected readonly output: string;

  /**
   * @param dimension what `info.dimension` reports, given the output's declared last axis
   * (default: that axis).
   */
  protected constructor(profile: ModelProfile, created: CreatedSession, choice: OutputChoice, dimension?: (lastAxis: number | null) => number | null) {
    this.profile = profile;
    this.session = created.session;
    const outputs = created.session.outputNames;
    this.output = chooseOutput(profile, outputs, choice);
    const lastAxis = lastDimension(created.session, this.output);
    this.info = {
      provider: created.provider,
      inputs: [...created.session.inputNames],
      outputs: [...outputs],
      dimension: dimension === undefined ? lastAxis : dimension(lastAxis),
    };
  }

  abstract run(batch: Prepared[], options: RunOptions): Promise<ItemOutput[]>;

  async release(): Promise<void> {
    await this.session.release();
  }
}

/** One forward pass over tokenized texts: the padded batch and the float output the family reads. */
export interface TextForward {
  collated: TextBatch;
  output: FloatTensor;
}

/** Collates tokenized texts for the graph's own inputs, runs the session and reads one float output. */
export async function forwardText(
  session: ort.InferenceSession,
  profile: ModelProfile,
  output: string,
  items: readonly PreparedText[],
  collate: CollateOptions,
): Promise<TextForward> {
  const collated = collateText(items, session.inputNames, collate);
  // Only the output read is fetched: a decoder's present.* KV outputs (and any other extra output)
  // are then released inside onnxruntime instead of being copied out for every batch.
  const outputs = await runChecked(session, collated.feeds, profile.id, [output]);
  return { collated, output: floatOutput(outputs, output, profile.id) };
}

/** How a text family pads its batches: the tokenizer's pad id and side, the model type's position rule. */
export function textCollateOptions(profile: ModelProfile): CollateOptions {
  return collateOptionsFor(profile, positionPadIdx(profile));
}

/**
 * A text family: `run` checks the batch is text, collates it for the graph's own inputs (ids,
 * mask, token types and position ids only when the graph takes them), runs it, and hands the
 * output to the family's `read`. A family that batches differently (ColBERT, by role) overrides
 * `run` and calls `forward` itself; one that reads windows of items (token classification)
 * builds on SessionRunner with `forwardText`.
 */
export abstract class TextRunner extends SessionRunner {
  /** The family's name, for errors. */
  protected abstract readonly family: string;
  readonly #collate: CollateOptions;

  protected constructor(profile: ModelProfile, created: CreatedSession, choice: OutputChoice, dimension?: (lastAxis: number | null) => number | null) {
    super(profile, created, choice, dimension);
    this.#collate = textCollateOptions(profile);
  }

  async run(batch: Prepared[], options: RunOptions): Promise<ItemOutput[]> {
    const items = requireTextBatch(batch, this.family);
    const forward = await this.forward(items);
    return this.read(items, forward, options);
  }

  protected forward(items: readonly PreparedText[]): Promise<TextForward> {
    return forwardText(this.session, this.profile, this.output, items, this.#collate);
  }

  /** One result per item, from the batch's output. */
  protected abstract read(items: readonly PreparedText[], forward: TextForward, options: RunOptions): ItemOutput[];
}
