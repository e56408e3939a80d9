import { z } from 'zod';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import type { SparseVector } from '../protocol/results.js';
import { parseWith } from '../protocol/validate.js';
import { describeOutputs, type CreatedSession } from '../runtime/ort-session.js';
import { floatOutput, runChecked, type FloatTensor } from '../runtime/tensors.js';
import { collateOptionsFor, collateText } from './collate.js';
import { requireTextBatch } from './dense.js';
import type { Evidence, FamilyAdapter, ItemOutput, Prepared, Runner, RunnerContext, RunOptions } from './family.js';
import { StSpladePoolingConfig } from './model-files.js';
import { positionPadIdx } from './model-types.js';
import { prepareTexts } from './text-prep.js';

/**
 * SPLADE sparse embeddings: a masked-LM head gives logits over the vocabulary at every position,
 * and the weight of term v is pooled over the real positions of log(1 + relu(logits[t, v]))
 * (sentence-transformers SpladePooling: `max` or `sum`, activation `relu` or `log1p_relu`).
 * Scores are sparse dot products of query and document vectors (similarity.ts).
 */

export const SpladeOptions = z.strictObject({
  pooling: z.enum(['max', 'sum']).default('max'),
  /** `relu`: log1p(relu(x)); `log1p_relu`: log1p(log1p(relu(x))) (OpenSearch sparse models). */
  activation: z.enum(['relu', 'log1p_relu']).default('relu'),
  /** ONNX output to read; default `logits`, or the graph's only output. */
  output: z.string().optional(),
});
export type SpladeOptions = z.infer<typeof SpladeOptions>;

const MLM_ARCHITECTURE = /ForMaskedLM$/;

function isSpladePooling(type: string): boolean {
  return type.endsWith('.SpladePooling') || type === 'SpladePooling';
}

interface PoolingRule {
  pooling: SpladeOptions['pooling'];
  activation: SpladeOptions['activation'];
}

/**
 * Pools one row of [batch, seq, vocab] logits into `weights` (length vocab, zero-filled).
 * Only positions whose mask is 1 count. For max pooling the activation is monotone, so the raw
 * maximum is taken first and log1p applied once per term; most logits are negative and skipped
 * with a single comparison.
 */
function poolRow(logits: Float32Array, row: number, seqLen: number, vocab: number, mask: Uint8Array, rule: PoolingRule, weights: Float32Array): void {
  for (let t = 0; t < seqLen; t++) {
    if (mask[row * seqLen + t] !== 1) continue;
    const base = (row * seqLen + t) * vocab;
    if (rule.pooling === 'max') {
      for (let v = 0; v < vocab; v++) {
        const x = logits[base + v] ?? 0;
        if (x > (weights[v] ?? 0)) weights[v] = x;
      }
    } else {
      for (let v = 0; v < vocab; v++) {
        const x = logits[base + v] ?? 0;
        if (x > 0) weights[v] = (weights[v] ?? 0) + activate(x, rule.activation);
      }
    }
  }
  if (rule.pooling === 'max') {
    for (let v = 0; v < vocab; v++) {
      const x = weights[v] ?? 0;
      if (x > 0) weights[v] = activate(x, rule.activation);
    }
  }
}

function activate(positive: number, activation: SpladeOptions['activation']): number {
  const once = Math.log1p(positive);
  return activation === 'relu' ? once : Math.log1p(once);
}

/** Non-zero entries of a dense weight vector, indices ascending. */
function toSparse(weights: Float32Array): SparseVector {
  const indices: number[] = [];
  const values: number[] = [];
  for (let v = 0; v < weights.length; v++) {
    const w = weights[v] ?? 0;
    if (w > 0) {
      indices.push(v);
      values.push(w);
    }
  }
  return { indices, values };
}

class SpladeRunner implements Runner {
  readonly info;
  readonly #context: RunnerContext;
  readonly #session;
  readonly #output: string;
  readonly #rule: PoolingRule;
  readonly #padIdx: number;

  constructor(context: RunnerContext, created: CreatedSession, options: SpladeOptions) {
    this.#context = context;
    this.#session = created.session;
    this.#rule = { pooling: options.pooling, activation: options.activation };
    this.#padIdx = positionPadIdx(context.profile);
    const outputs = created.session.outputNames;
    const chosen = options.output ?? (outputs.includes('logits') ? 'logits' : outputs.length === 1 ? outputs[0] : undefined);
    if (chosen === undefined || !outputs.includes(chosen)) {
      throw new ShoalError(
        ErrorCode.MODEL_LOAD_FAILED,
        `${context.profile.id}: cannot tell which ONNX output holds the MLM logits (outputs: ${outputs.join(', ')}); set options.output in the catalog`,
      );
    }
    this.#output = chosen;
    const meta = describeOutputs(created.session).find((o) => o.name === chosen);
    const last = meta?.shape[meta.shape.length - 1];
    this.info = {
      provider: created.provider,
      inputs: [...created.session.inputNames],
      outputs: [...outputs],
      dimension: typeof last === 'number' ? last : null,
    };
  }

  async run(batch: Prepared[], _options: RunOptions): Promise<ItemOutput[]> {
    const items = requireTextBatch(batch, 'splade');
    const profile = this.#context.profile;
    const collated = collateText(items, this.#session.inputNames, collateOptionsFor(profile, this.#padIdx));
    const outputs = await runChecked(this.#session, collated.feeds, profile.id);
    const logits = floatOutput(outputs, this.#output, profile.id);
    return items.map((_, row): ItemOutput => ({ sparse: this.#pool(logits, row, collated.seqLen, collated.mask) }));
  }

  #pool(logits: FloatTensor, row: number, seqLen: number, mask: Uint8Array): SparseVector {
    const { dims, data } = logits;
    if (dims.length === 2) {
      // An export that already ends in SpladePooling gives [batch, vocab] term weights.
      const vocab = dims[1] ?? 0;
      return toSparse(data.subarray(row * vocab, (row + 1) * vocab));
    }
    if (dims.length !== 3 || dims[1] !== seqLen) {
      throw new ShoalError(
        ErrorCode.INFERENCE_FAILED,
        `${this.#context.profile.id}: output "${this.#output}" has shape [${dims.join(', ')}]; SPLADE expects [batch, ${seqLen}, vocab] logits`,
      );
    }
    const vocab = dims[2] ?? 0;
    const weights = new Float32Array(vocab);
    poolRow(data, row, seqLen, vocab, mask, this.#rule, weights);
    return toSparse(weights);
  }

  async release(): Promise<void> {
    await this.#session.release();
  }
}

export const splade: FamilyAdapter = {
  name: 'splade',
  capabilities: { encode: ['sparse'], defaultOutputs: ['sparse'], score: 'embeddings', extract: false },

  match(evidence: Evidence): number {
    if (evidence.modules.some((m) => isSpladePooling(m.type))) return 110;
    const arch = evidence.config?.architectures?.[0] ?? '';
    return MLM_ARCHITECTURE.test(arch) ? 60 : 0;
  },

  async detectOptions(evidence: Evidence): Promise<Record<string, unknown>> {
    const module = evidence.modules.find((m) => isSpladePooling(m.type));
    if (module === undefined) return { pooling: 'max', activation: 'relu' };
    const file = `${module.path}/config.json`.replace(/^\//, '');
    const config = await evidence.folder.json(file, StSpladePoolingConfig);
    if (config === undefined) return { pooling: 'max', activation: 'relu' };
    return { pooling: config.pooling_strategy, activation: config.activation_function };
  },

  prepare: prepareTexts,

  async createRunner(context: RunnerContext): Promise<Runner> {
    const options = parseWith(SpladeOptions, context.profile.options, `splade options of ${context.profile.id}`, ErrorCode.CONFIG_INVALID);
    const created = await context.openSession('model');
    return new SpladeRunner(context, created, options);
  },
};
