import { z } from 'zod';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { describeOutputs } from '../runtime/ort-session.js';
import { floatOutput, runChecked } from '../runtime/tensors.js';
import { collateOptionsFor, collateText } from './collate.js';
import type { Evidence, FamilyAdapter, ItemOutput, Prepared, PreparedText, RunOptions, Runner, RunnerContext } from './family.js';
import { StPoolingConfig } from './model-files.js';
import { l2Normalize, poolRow, type PoolingMode } from './pooling.js';
import { isDecoderModelType, positionPadIdx } from './model-types.js';
import { prepareTexts } from './text-prep.js';
import { parseWith } from '../protocol/validate.js';

/**
 * Dense sentence embeddings: BERT/MiniLM/BGE/E5 (mean or [CLS]), XLM-R, and decoder embedders
 * such as Qwen3-Embedding (last-token pooling, left padding). Pooling and normalization come from
 * the sentence-transformers modules when present.
 */

export const DenseOptions = z.strictObject({
  pooling: z.enum(['mean', 'cls', 'last', 'max', 'mean_sqrt_len']),
  normalize: z.boolean(),
  /** false: prompt tokens are left out of mean pooling (1_Pooling include_prompt). */
  includePrompt: z.boolean().default(true),
  /** ONNX output to read; default: token embeddings (last_hidden_state / token_embeddings), else sentence_embedding. */
  output: z.string().optional(),
  /** The model has a sentence-transformers Dense layer: only a pooled graph output includes it. */
  projection: z.boolean().default(false),
});
export type DenseOptions = z.infer<typeof DenseOptions>;

const TOKEN_OUTPUTS = ['last_hidden_state', 'token_embeddings'];
const POOLED_OUTPUTS = ['sentence_embedding', 'pooler_output'];

function poolingFromConfig(config: z.infer<typeof StPoolingConfig>): PoolingMode {
  if (config.pooling_mode_cls_token) return 'cls';
  if (config.pooling_mode_lasttoken) return 'last';
  if (config.pooling_mode_max_tokens) return 'max';
  if (config.pooling_mode_mean_sqrt_len_tokens) return 'mean_sqrt_len';
  return 'mean';
}

function isTextBatch(batch: readonly Prepared[]): batch is PreparedText[] {
  return batch.every((item) => item.kind === 'text');
}

export function requireTextBatch(batch: readonly Prepared[], family: string): PreparedText[] {
  if (!isTextBatch(batch)) throw new ShoalError(ErrorCode.INTERNAL, `${family} received non-text items`);
  return batch;
}

class DenseRunner implements Runner {
  readonly info;
  readonly #context: RunnerContext;
  readonly #session;
  readonly #options: DenseOptions;
  readonly #output: string;
  readonly #pooled: boolean;
  readonly #padIdx: number;

  constructor(context: RunnerContext, created: Awaited<ReturnType<RunnerContext['openSession']>>, options: DenseOptions, padIdx: number) {
    this.#context = context;
    this.#session = created.session;
    this.#options = options;
    this.#padIdx = padIdx;
    const outputs = created.session.outputNames;
    const tokenOutput = TOKEN_OUTPUTS.find((name) => outputs.includes(name));
    const pooledOutput = POOLED_OUTPUTS.find((name) => outputs.includes(name));
    const chosen = options.output ?? tokenOutput ?? pooledOutput ?? (outputs.length === 1 ? outputs[0] : undefined);
    if (chosen === undefined || !outputs.includes(chosen)) {
      throw new ShoalError(
        ErrorCode.MODEL_LOAD_FAILED,
        `${context.profile.id}: cannot tell which ONNX output holds embeddings (outputs: ${outputs.join(', ')}); set options.output in the catalog`,
      );
    }
    this.#output = chosen;
    this.#pooled = POOLED_OUTPUTS.includes(chosen);
    if (options.projection && !this.#pooled) {
      throw new ShoalError(
        ErrorCode.MODEL_LOAD_FAILED,
        `${context.profile.id}: modules.json has a Dense projection but the ONNX graph has no sentence_embedding output; export the full sentence-transformers pipeline`,
      );
    }
    const meta = describeOutputs(created.session).find((o) => o.name === chosen);
    const last = meta?.shape[meta.shape.length - 1];
    this.info = {
      provider: created.provider,
      inputs: [...created.session.inputNames],
      outputs: [...outputs],
      dimension: typeof last === 'number' ? last : null,
    };
  }

  async run(batch: Prepared[], options: RunOptions): Promise<ItemOutput[]> {
    const items = requireTextBatch(batch, 'dense');
    const profile = this.#context.profile;
    const collated = collateText(items, this.#session.inputNames, collateOptionsFor(profile, this.#padIdx));
    const outputs = await runChecked(this.#session, collated.feeds, profile.id);
    const hidden = floatOutput(outputs, this.#output, profile.id);
    const normalize = options.normalize ?? this.#options.normalize;
    return items.map((item, row) => {
      let vector: Float32Array;
      if (this.#pooled) {
        const dim = hidden.dims[1] ?? 0;
        vector = hidden.data.slice(row * dim, (row + 1) * dim);
      } else {
        let mask = collated.mask;
        if (!this.#options.includePrompt && item.promptTokens > 0) {
          mask = collated.mask.slice();
          const start = row * collated.seqLen + (collated.rowStart[row] ?? 0);
          mask.fill(0, start, start + Math.min(item.promptTokens, collated.seqLen));
        }
        vector = poolRow(hidden, row, this.#options.pooling, { seqLen: collated.seqLen, mask });
      }
      if (normalize) l2Normalize(vector);
      return { dense: Array.from(vector) };
    });
  }

  async release(): Promise<void> {
    await this.#session.release();
  }
}

export const dense: FamilyAdapter = {
  name: 'dense',
  capabilities: { encode: ['dense'], defaultOutputs: ['dense'], score: 'embeddings', extract: false },

  match(evidence: Evidence): number {
    const modules = evidence.modules;
    if (modules.some((m) => m.type.endsWith('.Pooling') || m.type === 'Pooling')) return 100;
    const arch = evidence.config?.architectures?.[0] ?? '';
    if (/(Model|EmbeddingModel)$/.test(arch) && !arch.startsWith('CLIP')) return 40;
    return 0;
  },

  async detectOptions(evidence: Evidence): Promise<Record<string, unknown>> {
    const poolingModule = evidence.modules.find((m) => m.type.endsWith('.Pooling') || m.type === 'Pooling');
    const normalize = evidence.modules.some((m) => m.type.endsWith('.Normalize'));
    // A sentence-transformers Dense projection lives outside the transformer: the export must
    // have folded it into a pooled `sentence_embedding` output, which the runner then requires.
    const projection = evidence.modules.some((m) => m.type.endsWith('.Dense'));
    if (poolingModule !== undefined) {
      const file = `${poolingModule.path}/config.json`.replace(/^\//, '');
      const config = await evidence.folder.json(file, StPoolingConfig);
      if (config !== undefined) {
        return { pooling: poolingFromConfig(config), normalize, includePrompt: config.include_prompt, projection };
      }
    }
    const decoder = isDecoderModelType(evidence.config?.model_type ?? null);
    return { pooling: decoder ? 'last' : 'mean', normalize: true, includePrompt: true, projection };
  },

  prepare: prepareTexts,

  async createRunner(context: RunnerContext): Promise<Runner> {
    const options = parseWith(DenseOptions, context.profile.options, `dense options of ${context.profile.id}`, ErrorCode.CONFIG_INVALID);
    const created = await context.openSession('model');
    return new DenseRunner(context, created, options, positionPadIdx(context.profile));
  },
};
