import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { SparseVector } from '../../protocol/results.js';
import type { GraphRewrite } from '../../quantize/derived-graph.js';
import type { SpladePoolingReport } from '../../quantize/splade-pooling.js';
import type { CreatedSession } from '../../runtime/ort-session.js';
import type { FloatTensor } from '../../runtime/tensors.js';
import type { FamilyAdapter, ItemOutput, PreparedText } from '../family.js';
import { StSpladePoolingConfig } from '../model-files.js';
import type { ModelProfile } from '../profile.js';
import { prepareTexts } from '../text/text-prep.js';
import { familyOptions, openRunner, TextRunner, type TextForward } from '../text/text-runner.js';
import { isSpladePooling, spladeSpec } from './spec.js';

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
  /**
   * Pool inside the graph (adapters/quantize/splade-pooling.ts): the session returns [batch,
   * vocab] term weights instead of [batch, sequence, vocab] logits (30,522 floats a token) that
   * were pooled here. Same weights within float rounding (the conformance cases); on a real-size
   * SPLADE graph the logits' copy out of onnxruntime was as long as a third of each batch.
   * false: the logits come back and are pooled here, as before. @default true
   */
  poolInGraph: z.boolean().default(true),
});
export type SpladeOptions = z.infer<typeof SpladeOptions>;

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

/** The pooled output of the rewritten graph: splade-pooling.ts's SPLADE_WEIGHTS_OUTPUT (not imported: that module loads the protobuf code). */
export const POOLED_OUTPUT = 'splade_weights';

/** The load-time rewrite that pools inside the graph. */
function poolingRewrite(options: SpladeOptions): GraphRewrite<SpladePoolingReport> {
  const params = { logits: options.output ?? null, mask: 'attention_mask', pooling: options.pooling, activation: options.activation };
  return {
    // Bump whenever splade-pooling.ts would write a different graph: cached copies are then rebuilt.
    version: 'shoal-splade-pooling/3',
    params,
    apply: async (model) => (await import('../../quantize/splade-pooling.js')).rewriteSpladePooling(model, params),
    // Without the copy (a read-only cache) the logits come back and are pooled here.
    optional: true,
  };
}

class SpladeRunner extends TextRunner {
  protected readonly family = 'splade';
  readonly #rule: PoolingRule;

  constructor(profile: ModelProfile, created: CreatedSession, options: SpladeOptions) {
    // A graph the rewrite could not pool (an export ending in SpladePooling, no attention mask) keeps its outputs.
    const pooled = created.session.outputNames.includes(POOLED_OUTPUT);
    super(profile, created, { holds: 'the MLM logits', preferred: ['logits'], configured: pooled ? POOLED_OUTPUT : options.output });
    this.#rule = { pooling: options.pooling, activation: options.activation };
  }

  protected read(items: readonly PreparedText[], { collated, output }: TextForward): ItemOutput[] {
    return items.map((_, row): ItemOutput => ({ sparse: this.#pool(output, row, collated.seqLen, collated.mask) }));
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
        `${this.profile.id}: output "${this.output}" has shape [${dims.join(', ')}]; SPLADE expects [batch, ${seqLen}, vocab] logits`,
      );
    }
    const vocab = dims[2] ?? 0;
    const weights = new Float32Array(vocab);
    poolRow(data, row, seqLen, vocab, mask, this.#rule, weights);
    return toSparse(weights);
  }
}

export const splade: FamilyAdapter<'splade'> = {
  name: 'splade',
  ...spladeSpec,

  async detectOptions(evidence) {
    const module = evidence.modules.find((m) => isSpladePooling(m.type));
    if (module === undefined) return { pooling: 'max', activation: 'relu' };
    const file = `${module.path}/config.json`.replace(/^\//, '');
    const config = await evidence.folder.json(file, StSpladePoolingConfig);
    if (config === undefined) return { pooling: 'max', activation: 'relu' };
    return { pooling: config.pooling_strategy, activation: config.activation_function };
  },

  prepare: prepareTexts,

  async createRunner(context) {
    const options = familyOptions(SpladeOptions, context.profile, 'splade');
    return openRunner(context, (created) => new SpladeRunner(context.profile, created, options), options.poolInGraph ? poolingRewrite(options) : undefined);
  },
};
