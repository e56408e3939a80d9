import { z } from 'zod';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { parseWith } from '../protocol/validate.js';
import { describeOutputs, type CreatedSession } from '../runtime/ort-session.js';
import { floatOutput, runChecked } from '../runtime/tensors.js';
import { collateOptionsFor, collateText } from './collate.js';
import { requireTextBatch } from './dense.js';
import type { Evidence, FamilyAdapter, ItemOutput, Prepared, Runner, RunnerContext, RunOptions } from './family.js';
import type { HfConfig } from './model-files.js';
import { positionPadIdx } from './model-types.js';
import { prepareTexts } from './text-prep.js';

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

const ARCHITECTURE = /ForSequenceClassification$/;

function labelCount(config: HfConfig | undefined): number {
  if (config?.num_labels !== undefined) return config.num_labels;
  const id2label = config?.id2label;
  // transformers' PretrainedConfig defaults to two labels when id2label is absent.
  return id2label === undefined ? 2 : Math.max(Object.keys(id2label).length, 1);
}

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

class CrossEncoderRunner implements Runner {
  readonly info;
  readonly #context: RunnerContext;
  readonly #session;
  readonly #output: string;
  readonly #activation: Activation;
  readonly #labelIndex: number;
  readonly #padIdx: number;

  constructor(context: RunnerContext, created: CreatedSession, options: CrossEncoderOptions & { activation: Activation }) {
    this.#context = context;
    this.#session = created.session;
    this.#activation = options.activation;
    this.#labelIndex = options.labelIndex;
    this.#padIdx = positionPadIdx(context.profile);
    const outputs = created.session.outputNames;
    const chosen = options.output ?? (outputs.includes('logits') ? 'logits' : outputs.length === 1 ? outputs[0] : undefined);
    if (chosen === undefined || !outputs.includes(chosen)) {
      throw new ShoalError(
        ErrorCode.MODEL_LOAD_FAILED,
        `${context.profile.id}: cannot tell which ONNX output holds the logits (outputs: ${outputs.join(', ')}); set options.output in the catalog`,
      );
    }
    this.#output = chosen;
    const meta = describeOutputs(created.session).find((o) => o.name === chosen);
    const width = meta?.shape[1];
    if (typeof width === 'number' && options.labelIndex >= width) {
      throw new ShoalError(
        ErrorCode.CONFIG_INVALID,
        `${context.profile.id}: options.labelIndex ${options.labelIndex} is out of range for ${width} logit column(s)`,
      );
    }
    this.info = { provider: created.provider, inputs: [...created.session.inputNames], outputs: [...outputs], dimension: null };
  }

  async run(batch: Prepared[], _options: RunOptions): Promise<ItemOutput[]> {
    const items = requireTextBatch(batch, 'cross-encoder');
    const profile = this.#context.profile;
    const collated = collateText(items, this.#session.inputNames, collateOptionsFor(profile, this.#padIdx));
    const outputs = await runChecked(this.#session, collated.feeds, profile.id);
    const logits = floatOutput(outputs, this.#output, profile.id);
    // [batch, labels]; a [batch] output (squeezed export) is one label per row.
    const width = logits.dims.length >= 2 ? (logits.dims[1] ?? 1) : 1;
    if (this.#labelIndex >= width) {
      throw new ShoalError(
        ErrorCode.INFERENCE_FAILED,
        `${profile.id}: labelIndex ${this.#labelIndex} is out of range for ${width} logit column(s)`,
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

  async release(): Promise<void> {
    await this.#session.release();
  }
}

export const crossEncoder: FamilyAdapter = {
  name: 'cross-encoder',
  capabilities: { encode: [], defaultOutputs: [], score: 'pairs', extract: false },

  match(evidence: Evidence): number {
    const config = evidence.config;
    const arch = config?.architectures?.[0] ?? '';
    if (!ARCHITECTURE.test(arch)) return 0;
    // A one-logit head, or a model saved by sentence-transformers' CrossEncoder, is a reranker;
    // other sequence classifiers are left to classification families.
    if (config?.sentence_transformers !== undefined || labelCount(config) === 1) return 90;
    return 0;
  },

  async detectOptions(evidence: Evidence): Promise<Record<string, unknown>> {
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

  async createRunner(context: RunnerContext): Promise<Runner> {
    const options = parseWith(CrossEncoderOptions, context.profile.options, `cross-encoder options of ${context.profile.id}`, ErrorCode.CONFIG_INVALID);
    if (options.activation === undefined) {
      throw new ShoalError(
        ErrorCode.CONFIG_INVALID,
        `${context.profile.id}: config.json sentence_transformers.activation_fn "${options.activationFn ?? '?'}" is not one Shoal knows (Sigmoid, Identity, Softmax); set options.activation in the catalog`,
      );
    }
    const { activation } = options;
    const created = await context.openSession('model');
    return new CrossEncoderRunner(context, created, { ...options, activation });
  },
};
