import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { CreatedSession } from '../../runtime/ort-session.js';
import type { FamilyAdapter, ItemOutput, PreparedText, RunOptions } from '../family.js';
import { StPoolingConfig } from '../model-files.js';
import { isDecoderModelType } from '../model-types.js';
import type { ModelProfile } from '../profile.js';
import { l2Normalize, poolRow, type PoolingMode } from '../text/pooling.js';
import { prepareTexts } from '../text/text-prep.js';
import { familyOptions, openRunner, TextRunner, type TextForward } from '../text/text-runner.js';
import { denseSpec, isPoolingModule } from './spec.js';

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

class DenseRunner extends TextRunner {
  protected readonly family = 'dense';
  readonly #options: DenseOptions;
  /** The output is already one vector per item (sentence_embedding): nothing to pool. */
  readonly #pooled: boolean;

  constructor(profile: ModelProfile, created: CreatedSession, options: DenseOptions) {
    // A Dense projection exists only in the pooled output, so with one the pooled output is tried
    // first (EmbeddingGemma/Optimum exports carry both last_hidden_state and sentence_embedding).
    const preferred = options.projection ? [...POOLED_OUTPUTS, ...TOKEN_OUTPUTS] : [...TOKEN_OUTPUTS, ...POOLED_OUTPUTS];
    super(profile, created, { holds: 'embeddings', preferred, configured: options.output });
    this.#options = options;
    this.#pooled = POOLED_OUTPUTS.includes(this.output);
    if (options.projection && !this.#pooled) {
      throw new ShoalError(
        ErrorCode.MODEL_LOAD_FAILED,
        `${profile.id}: modules.json has a Dense projection but the ONNX graph has no sentence_embedding output; export the full sentence-transformers pipeline`,
      );
    }
  }

  protected read(items: readonly PreparedText[], { collated, output }: TextForward, options: RunOptions): ItemOutput[] {
    const normalize = options.normalize ?? this.#options.normalize;
    return items.map((item, row) => {
      let vector: Float32Array;
      if (this.#pooled) {
        const dim = output.dims[1] ?? 0;
        vector = output.data.slice(row * dim, (row + 1) * dim);
      } else {
        let mask = collated.mask;
        if (!this.#options.includePrompt && item.promptTokens > 0) {
          mask = collated.mask.slice();
          const start = row * collated.seqLen + (collated.rowStart[row] ?? 0);
          mask.fill(0, start, start + Math.min(item.promptTokens, collated.seqLen));
        }
        vector = poolRow(output, row, this.#options.pooling, { seqLen: collated.seqLen, mask });
      }
      if (normalize) l2Normalize(vector);
      return { dense: vector };
    });
  }
}

export const dense: FamilyAdapter<'dense'> = {
  name: 'dense',
  ...denseSpec,

  async detectOptions(evidence) {
    const poolingModule = evidence.modules.find(isPoolingModule);
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

  async createRunner(context) {
    const options = familyOptions(DenseOptions, context.profile, 'dense');
    return openRunner(context, (created) => new DenseRunner(context.profile, created, options));
  },
};
