import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { GraphRewrite } from '../../quantize/derived-graph.js';
import type { LastTokenReport } from '../../quantize/last-token-logits.js';
import type { CreatedSession } from '../../runtime/ort-session.js';
import type { TextTokenizer } from '../../tokenizers/text-tokenizer.js';
import { requireTokenizer, type FamilyAdapter, type ItemOutput, type PreparedText } from '../family.js';
import type { ModelProfile } from '../profile.js';
import { familyOptions, TextRunner, type TextForward } from '../text/text-runner.js';
import { promptIds, QWEN3_RERANKER_PROMPT, RerankerPrompt } from './reranker-prompt.js';
import { causalRerankerSpec } from './spec.js';

/**
 * Causal-LM rerankers: the pair is written into the model's chat prompt (reranker-prompt.ts),
 * the LM reads it in one pass (an empty KV cache when the graph takes one), and the score is
 * P(yes) = softmax([logit(no), logit(yes)])[1] = sigmoid(yes - no) at the last real token.
 *
 * The graph is never run as exported: its logits output is [batch, sequence, vocab] (for Qwen3,
 * 151,936 floats per token). At load the graph is rewritten once (adapters/quantize/
 * last-token-logits.ts, cached) to return only the last token's no/yes logits, [batch, 2].
 */

export const CausalRerankerOptions = RerankerPrompt.extend({
  yesToken: z.string().default(QWEN3_RERANKER_PROMPT.yesToken),
  noToken: z.string().default(QWEN3_RERANKER_PROMPT.noToken),
  /** Vocabulary ids of the two answers, resolved from the tokens at detection. */
  yesId: z.number().int().nonnegative(),
  noId: z.number().int().nonnegative(),
  /** The exported graph's logits output. */
  logitsOutput: z.string().default('logits'),
  /**
   * false: run the graph as exported and pick the two logits from its full [batch, sequence,
   * vocab] output (for checking the rewrite; a batch then costs sequence × vocab floats per pair).
   */
  rewrite: z.boolean().default(true),
});
export type CausalRerankerOptions = z.output<typeof CausalRerankerOptions>;

function answerId(tokenizer: TextTokenizer, token: string, which: string): number {
  const ids = tokenizer.segmentIds(token);
  const [id] = ids;
  if (ids.length !== 1 || id === undefined) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `the reranker's ${which} answer "${token}" is ${ids.length} tokens; it must be exactly one (options.${which}Token)`);
  }
  return id;
}

/** The rewritten graph's one output (last-token-logits.ts LAST_TOKEN_OUTPUT; that module is loaded only to build). */
const LAST_TOKEN_LOGITS = 'last_token_logits';

function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x));
}

/** The load-time rewrite of this model's graph: last token, no/yes columns only. */
function lastTokenRewrite(options: CausalRerankerOptions): GraphRewrite<LastTokenReport> {
  const params = { logits: options.logitsOutput, columns: [options.noId, options.yesId] };
  return {
    // Bump whenever last-token-logits.ts would write a different graph: cached copies are then rebuilt.
    version: 'shoal-last-token-logits/1',
    params,
    // Imported only to build: a cached copy loads without the protobuf code.
    apply: async (model) => (await import('../../quantize/last-token-logits.js')).rewriteLastTokenLogits(model, params),
  };
}

/** The no/yes logits of each row: [batch, 2] from the rewritten graph, or picked from [batch, sequence, vocab]. */
function answerLogits(forward: TextForward, items: number, full: { noId: number; yesId: number } | null): Float32Array {
  const { output, collated } = forward;
  if (full === null) {
    if (output.dims.length !== 2 || output.dims[1] !== 2 || output.dims[0] !== items) {
      throw new ShoalError(ErrorCode.INFERENCE_FAILED, `expected [${items}, 2] no/yes logits, got [${output.dims.join(', ')}]`);
    }
    return output.data;
  }
  const [batch, seq = 0, vocab = 0] = output.dims;
  if (output.dims.length !== 3 || batch !== items || seq !== collated.seqLen) {
    throw new ShoalError(ErrorCode.INFERENCE_FAILED, `expected [${items}, ${collated.seqLen}, vocab] logits, got [${output.dims.join(', ')}]`);
  }
  const picked = new Float32Array(items * 2);
  for (let row = 0; row < items; row++) {
    let last = seq - 1;
    while (last > 0 && collated.mask[row * seq + last] !== 1) last--;
    const base = (row * seq + last) * vocab;
    picked[row * 2] = output.data[base + full.noId] ?? Number.NaN;
    picked[row * 2 + 1] = output.data[base + full.yesId] ?? Number.NaN;
  }
  return picked;
}

class CausalRerankerRunner extends TextRunner {
  protected readonly family = 'causal-reranker';
  /** Set when the graph runs unrewritten: the answer ids to pick from its full logits. */
  readonly #full: { noId: number; yesId: number } | null;

  constructor(profile: ModelProfile, created: CreatedSession, options: CausalRerankerOptions) {
    const output = options.rewrite ? LAST_TOKEN_LOGITS : options.logitsOutput;
    super(profile, created, { holds: 'the no/yes logits', preferred: [output] }, () => null);
    this.#full = options.rewrite ? null : { noId: options.noId, yesId: options.yesId };
  }

  protected read(items: readonly PreparedText[], forward: TextForward): ItemOutput[] {
    let logits: Float32Array;
    try {
      logits = answerLogits(forward, items.length, this.#full);
    } catch (error) {
      if (error instanceof ShoalError) throw new ShoalError(error.code, `${this.profile.id}: ${error.message}`, { cause: error });
      throw error;
    }
    return items.map((_, row): ItemOutput => ({ score: sigmoid((logits[row * 2 + 1] ?? Number.NaN) - (logits[row * 2] ?? Number.NaN)) }));
  }
}

export const causalReranker: FamilyAdapter<'causal-reranker'> = {
  name: 'causal-reranker',
  ...causalRerankerSpec,

  async detectOptions(evidence, tokenizer) {
    const text = requireTokenizer(tokenizer, evidence.name);
    // The catalog may name other answer tokens: they are resolved here, where the tokenizer is.
    const catalog = z.looseObject({ yesToken: z.string().optional(), noToken: z.string().optional() }).safeParse(evidence.catalogOptions);
    const yesToken = (catalog.success ? catalog.data.yesToken : undefined) ?? QWEN3_RERANKER_PROMPT.yesToken;
    const noToken = (catalog.success ? catalog.data.noToken : undefined) ?? QWEN3_RERANKER_PROMPT.noToken;
    return { yesId: answerId(text, yesToken, 'yes'), noId: answerId(text, noToken, 'no') };
  },

  prepare(context, request) {
    const tokenizer = requireTokenizer(context.tokenizer, context.profile.id);
    const options = familyOptions(CausalRerankerOptions, context.profile, 'causal-reranker');
    return request.items.map((item) =>
      promptIds(
        tokenizer,
        options,
        { query: item.text, document: item.pair ?? '', instruction: item.instruction },
        { maxLength: request.maxLength, ...(request.exactLength === true ? { exactLength: true } : {}) },
      ),
    );
  },

  async createRunner(context) {
    const options = familyOptions(CausalRerankerOptions, context.profile, 'causal-reranker');
    const created = await context.openSession('model', options.rewrite ? lastTokenRewrite(options) : undefined);
    try {
      return new CausalRerankerRunner(context.profile, created, options);
    } catch (error) {
      await created.session.release();
      throw error;
    }
  },
};
