import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { CreatedSession } from '../../runtime/ort-session.js';
import type { FamilyAdapter, ItemOutput, PreparedText } from '../family.js';
import type { ModelProfile } from '../profile.js';
import { prepareTexts } from '../text/text-prep.js';
import { familyOptions, openRunner, outputShape, TextRunner, type TextForward } from '../text/text-runner.js';
import { crossEncoderSpec, labelCount } from './spec.js';

/**
 * Cross-encoders (rerankers): a *ForSequenceClassification graph reads the (query, passage) pair
 * in one sequence and its logits become the relevance score. The pair template and longest-first
 * truncation come from the tokenizer (PrepItem.pair); the activation follows sentence-transformers'
 * CrossEncoder: config.json `sentence_transformers.activation_fn`, else sigmoid for one label and
 * softmax (probability of label 1, "relevant") for two.
 */

export const Activation = z.enum(['sigmoid', 'identity', 'softmax']);
export type Activation = z.infer<typeof Activation>;

export const CrossEncoderOptions = z.strictObject({
  /** How logits become a score; absent when config.json names an activation Shoal does not know. */
  activation: Activation.optional(),
  /** Which logit column is the score (softmax: which class probability). */
  labelIndex: z.number().int().nonnegative().default(0),
  /** The raw activation_fn string, kept for the error message when it is not recognized. */
  activationFn: z.string().optional(),
  /** ONNX output to read; default `logits`, or the graph's only output. */
  output: z.string().optional(),
});
export type CrossEncoderOptions = z.infer<typeof CrossEncoderOptions>;

/** Maps a torch module path such as `torch.nn.modules.activation.Sigmoid` to an activation. */
function activationFromName(name: string): Activation | undefined {
  const last = name.slice(name.lastIndexOf('.') + 1).toLowerCase();
  if (last === 'sigmoid') return 'sigmoid';
  if (last === 'identity') return 'identity';
  if (last === 'softmax') return 'softmax';
  return undefined;
}

function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x));
}

/** Softmax probability of column `index` of one row, shifted by the row max for stability. */
function softmaxAt(row: Float32Array, index: number): number {
  let max = Number.NEGATIVE_INFINITY;
  for (const value of row) if (value > max) max = value;
  let sum = 0;
  for (const value of row) sum += Math.exp(value - max);
  return Math.exp((row[index] ?? Number.NaN) - max) / sum;
}

class CrossEncoderRunner extends TextRunner {
  protected readonly family = 'cross-encoder';
  readonly #activation: Activation;
  readonly #labelIndex: number;

  constructor(profile: ModelProfile, created: CreatedSession, options: CrossEncoderOptions & { activation: Activation }) {
    super(profile, created, { holds: 'the logits', preferred: ['logits'], configured: options.output }, () => null);
    this.#activation = options.activation;
    this.#labelIndex = options.labelIndex;
    const columns = outputShape(this.session, this.output)[1];
    if (typeof columns === 'number' && options.labelIndex >= columns) {
      throw new ShoalError(
        ErrorCode.CONFIG_INVALID,
        `${profile.id}: options.labelIndex ${options.labelIndex} is out of range for ${columns} logit column(s)`,
      );
    }
  }

  protected read(items: readonly PreparedText[], { output: logits }: TextForward): ItemOutput[] {
    // [batch, labels]; a [batch] output (squeezed export) is one label per row.
    const width = logits.dims.length >= 2 ? (logits.dims[1] ?? 1) : 1;
    if (this.#labelIndex >= width) {
      throw new ShoalError(
        ErrorCode.INFERENCE_FAILED,
        `${this.profile.id}: labelIndex ${this.#labelIndex} is out of range for ${width} logit column(s)`,
      );
    }
    return items.map((_, row): ItemOutput => {
      const values = logits.data.subarray(row * width, (row + 1) * width);
      const logit = values[this.#labelIndex] ?? Number.NaN;
      switch (this.#activation) {
        case 'sigmoid':
          return { score: sigmoid(logit) };
        case 'identity':
          return { score: logit };
        case 'softmax':
          return { score: softmaxAt(values, this.#labelIndex) };
      }
    });
  }
}

export const crossEncoder: FamilyAdapter<'cross-encoder'> = {
  name: 'cross-encoder',
  ...crossEncoderSpec,

  async detectOptions(evidence) {
    const labels = labelCount(evidence.config);
    const activationFn = evidence.config?.sentence_transformers?.activation_fn;
    const fallback: Activation = labels === 1 ? 'sigmoid' : 'softmax';
    const activation = activationFn === undefined ? fallback : activationFromName(activationFn);
    // Binary classifiers used as rerankers put "relevant" in class 1 (options.labelIndex overrides).
    const options: Record<string, unknown> = { labelIndex: labels === 1 ? 0 : 1 };
    if (activation !== undefined) options.activation = activation;
    if (activationFn !== undefined) options.activationFn = activationFn;
    return options;
  },

  prepare: prepareTexts,

  async createRunner(context) {
    const options = familyOptions(CrossEncoderOptions, context.profile, 'cross-encoder');
    if (options.activation === undefined) {
      throw new ShoalError(
        ErrorCode.CONFIG_INVALID,
        `${context.profile.id}: config.json sentence_transformers.activation_fn "${options.activationFn ?? '?'}" is not one Shoal knows (Sigmoid, Identity, Softmax); set options.activation in the catalog`,
      );
    }
    const { activation } = options;
    return openRunner(context, (created) => new CrossEncoderRunner(context.profile, created, { ...options, activation }));
  },
};
