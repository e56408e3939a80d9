import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { Entity } from '../../protocol/results.js';
import type { CreatedSession } from '../../runtime/ort-session.js';
import type { TextTokenizer } from '../../tokenizers/text-tokenizer.js';
import type { CollateOptions } from '../text/collate.js';
import { requireTokenizer, type FamilyAdapter, type ItemOutput, type Prepared, type PrepContext, type PreparedText, type PrepareRequest, type RunOptions } from '../family.js';
import type { HfConfig } from '../model-files.js';
import type { ModelProfile } from '../profile.js';
import { familyOptions, forwardText, lastDimension, openRunner, requireTextBatch, SessionRunner, textCollateOptions } from '../text/text-runner.js';
import { tokenClassificationSpec } from './spec.js';
import { aggregateEntities, isSubword, type AggregateOptions, type TokenPrediction } from './token-aggregation.js';
import { defaultOverlap, planWindows, type TokenWindow } from './token-windows.js';

/**
 * Token classification (NER): `*ForTokenClassification` models such as dslim/bert-base-NER. Every
 * token gets the argmax of its logits over config.json's id2label, with its softmax probability,
 * and tokens are merged into entities as Hugging Face's TokenClassificationPipeline does. Spans are
 * character offsets into the caller's original text. A text longer than one model pass is read in
 * overlapping windows (token-windows.ts) instead of being cut, so no entity past the limit is lost.
 */

export const TokenClassificationOptions = z.strictObject({
  /** Label of each logit, from config.json id2label. */
  labels: z.array(z.string(), { error: 'config.json has neither id2label nor num_labels: set options.labels in the catalog' }).min(1),
  /** How sub-words are recognized for 'first' aggregation (see token-aggregation.ts). */
  subwords: z.enum(['length', 'space']),
  /** Id of the unknown token: an [UNK] is always a word of its own. */
  unkId: z.number().int().nullable(),
  /** Special tokens the single-text template puts before and after the text ([CLS] / [SEP]). */
  specialPrefix: z.number().int().nonnegative(),
  specialSuffix: z.number().int().nonnegative(),
  /** `window`: read long texts in overlapping windows; `truncate`: keep the first max_length tokens. */
  longText: z.enum(['window', 'truncate']).default('window'),
  /** Tokens consecutive windows share (the HF pipeline's `stride`); default a quarter of a window. */
  overlap: z.number().int().nonnegative().optional(),
});
export type TokenClassificationOptions = z.infer<typeof TokenClassificationOptions>;

const LOGIT_OUTPUTS = ['logits', 'output', 'scores'];
/** The Hugging Face pipeline's ignore_labels: tokens and groups outside any entity. */
const OUTSIDE = 'O';
/** Padded tokens per ONNX run when windows of long texts are batched (bounds activation memory). */
const WINDOWED_RUN_TOKENS = 16_384;
/** encodeWithOffsets limit meaning "keep every token". */
const UNBOUNDED = Number.MAX_SAFE_INTEGER;

const TokenizerModelJson = z.looseObject({
  model: z.looseObject({ continuing_subword_prefix: z.string().nullable().optional() }),
});

function optionsOf(id: string, options: Record<string, unknown>): TokenClassificationOptions {
  return familyOptions(TokenClassificationOptions, { id, options }, 'token-classification');
}

/** id2label as a dense list; transformers' LABEL_i names when only num_labels is known. */
function labelsFromConfig(config: HfConfig | undefined): string[] | undefined {
  const id2label = config?.id2label;
  if (id2label !== undefined) {
    const labels: string[] = [];
    const count = Object.keys(id2label).length;
    for (let i = 0; i < count; i++) {
      const label = id2label[String(i)];
      if (label === undefined) {
        throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `config.json id2label has no entry "${i}" (ids must run 0..${count - 1})`);
      }
      labels.push(label);
    }
    return labels;
  }
  const count = config?.num_labels;
  return count === undefined ? undefined : Array.from({ length: count }, (_, i) => `LABEL_${i}`);
}

function templateEdges(tokenizer: TextTokenizer): { specialPrefix: number; specialSuffix: number } {
  const pieces = tokenizer.info.template.single;
  const sequence = pieces.findIndex((piece) => piece.kind === 'sequence');
  let specialPrefix = 0;
  let specialSuffix = 0;
  pieces.forEach((piece, i) => {
    if (piece.kind !== 'special') return;
    if (sequence < 0 || i < sequence) specialPrefix += piece.ids.length;
    else specialSuffix += piece.ids.length;
  });
  return { specialPrefix, specialSuffix };
}

function prepareTokens(context: PrepContext, request: PrepareRequest): PreparedText[] {
  const { profile } = context;
  const tokenizer = requireTokenizer(context.tokenizer, profile.id);
  const options = optionsOf(profile.id, profile.options);
  const special = options.specialPrefix + options.specialSuffix;
  const windowed = options.longText === 'window';
  if (windowed && request.maxLength <= special) {
    throw new ShoalError(
      ErrorCode.INVALID_INPUT,
      `max_length ${request.maxLength} leaves no room for text next to ${special} special tokens; use at least ${special + 1}`,
    );
  }
  return request.items.map((item): PreparedText => {
    const encoded = tokenizer.encodeWithOffsets(item.text, windowed ? UNBOUNDED : request.maxLength);
    const prepared: PreparedText = {
      kind: 'text',
      ids: encoded.ids,
      typeIds: encoded.typeIds.some((t) => t !== 0) ? encoded.typeIds : null,
      attention: null,
      truncated: encoded.truncated,
      length: encoded.length,
      promptTokens: 0,
      role: item.role,
      tokens: encoded.tokens,
      offsets: encoded.offsets,
      text: item.text,
    };
    if (encoded.ids.length > request.maxLength) prepared.windowLength = request.maxLength;
    return prepared;
  });
}

/** One sequence fed to the model: a window of an item, with the template's special tokens around it. */
interface Row {
  item: number;
  window: TokenWindow;
  input: PreparedText;
}

/** Per-token argmax and its probability, for the text tokens of one item. */
interface TokenScores {
  labels: Int32Array;
  scores: Float64Array;
}

class TokenClassificationRunner extends SessionRunner {
  readonly #options: TokenClassificationOptions;
  readonly #collate: CollateOptions;

  constructor(profile: ModelProfile, created: CreatedSession, options: TokenClassificationOptions) {
    super(profile, created, { holds: 'the token logits', preferred: LOGIT_OUTPUTS }, () => options.labels.length);
    this.#options = options;
    this.#collate = textCollateOptions(profile);
    const last = lastDimension(this.session, this.output);
    if (last !== null && last !== options.labels.length) {
      throw new ShoalError(
        ErrorCode.MODEL_LOAD_FAILED,
        `${profile.id}: the ONNX graph gives ${last} logits per token but config.json names ${options.labels.length} labels; set options.labels in the catalog`,
      );
    }
  }

  async run(batch: Prepared[], options: RunOptions): Promise<ItemOutput[]> {
    const items = requireTextBatch(batch, 'token-classification');
    const rows = items.flatMap((item, index) => this.#rows(item, index));
    const scores = items.map((item): TokenScores => {
      const count = Math.max(0, item.ids.length - this.#options.specialPrefix - this.#options.specialSuffix);
      return { labels: new Int32Array(count), scores: new Float64Array(count) };
    });
    const budget = items.some((item) => item.windowLength !== undefined) ? WINDOWED_RUN_TOKENS : Number.POSITIVE_INFINITY;
    for (const chunk of chunkRows(rows, budget)) await this.#score(chunk, scores);
    return items.map((item, index) => ({ entities: this.#entities(item, scores[index], options) }));
  }

  /** The windows an item is read in; a text that fits is a single window holding it all. */
  #rows(item: PreparedText, index: number): Row[] {
    const { specialPrefix, specialSuffix } = this.#options;
    const count = Math.max(0, item.ids.length - specialPrefix - specialSuffix);
    if (item.windowLength === undefined) return [{ item: index, window: { start: 0, end: count, keepStart: 0, keepEnd: count }, input: item }];
    const size = item.windowLength - specialPrefix - specialSuffix;
    const windows = planWindows(count, size, this.#options.overlap ?? defaultOverlap(size));
    const cutOut = (values: readonly number[], window: TokenWindow): number[] => [
      ...values.slice(0, specialPrefix),
      ...values.slice(specialPrefix + window.start, specialPrefix + window.end),
      ...values.slice(values.length - specialSuffix),
    ];
    return windows.map((window) => {
      const ids = cutOut(item.ids, window);
      const input: PreparedText = {
        kind: 'text',
        ids,
        typeIds: item.typeIds === null ? null : cutOut(item.typeIds, window),
        attention: null,
        truncated: false,
        length: ids.length,
        promptTokens: 0,
        role: item.role,
      };
      return { item: index, window, input };
    });
  }

  /** Runs one chunk of rows and records argmax + probability of every token each row keeps. */
  async #score(rows: readonly Row[], scores: readonly (TokenScores | undefined)[]): Promise<void> {
    const { collated, output: logits } = await forwardText(this.session, this.profile, this.output, rows.map((row) => row.input), this.#collate);
    const labelCount = this.#options.labels.length;
    if (logits.dims.length !== 3 || logits.dims[2] !== labelCount || logits.dims[1] !== collated.seqLen) {
      throw new ShoalError(ErrorCode.INFERENCE_FAILED, `${this.profile.id}: logits have shape [${logits.dims.join(', ')}], expected [batch, ${collated.seqLen}, ${labelCount}]`);
    }
    rows.forEach((row, r) => {
      const target = scores[row.item];
      if (target === undefined) return;
      const { window } = row;
      const first = r * collated.seqLen + (collated.rowStart[r] ?? 0) + this.#options.specialPrefix - window.start;
      for (let t = window.keepStart; t < window.keepEnd; t++) {
        const base = (first + t) * labelCount;
        let best = 0;
        let max = logits.data[base] ?? 0;
        for (let k = 1; k < labelCount; k++) {
          const value = logits.data[base + k] ?? 0;
          if (value > max) {
            max = value;
            best = k;
          }
        }
        // Softmax probability of the argmax, shifted by the max for stability: exp(0) / Σ exp(x - max).
        let sum = 0;
        for (let k = 0; k < labelCount; k++) sum += Math.exp((logits.data[base + k] ?? 0) - max);
        target.labels[t] = best;
        target.scores[t] = 1 / sum;
      }
    });
  }

  #entities(item: PreparedText, scores: TokenScores | undefined, options: RunOptions): Entity[] {
    const { tokens, offsets, text } = item;
    if (tokens === undefined || offsets === undefined || text === undefined || scores === undefined) {
      throw new ShoalError(ErrorCode.INTERNAL, 'token-classification items must carry tokens, offsets and text');
    }
    const { specialPrefix, labels, subwords, unkId } = this.#options;
    const predictions: TokenPrediction[] = [];
    for (let t = 0; t < scores.labels.length; t++) {
      const position = specialPrefix + t;
      const token = tokens[position] ?? '';
      const span = offsets[position] ?? [0, 0];
      predictions.push({
        token,
        span,
        label: labels[scores.labels[t] ?? 0] ?? OUTSIDE,
        score: scores.scores[t] ?? 0,
        subword: isSubword(subwords, token, text, span, item.ids[position] === unkId),
      });
    }
    const aggregate: AggregateOptions = { strategy: options.aggregation ?? 'simple', outside: OUTSIDE };
    if (options.threshold !== undefined) aggregate.threshold = options.threshold;
    return aggregateEntities(text, predictions, aggregate);
  }
}

/** Consecutive rows whose padded size (longest × count) stays within `budget`; at least one row each. */
function chunkRows(rows: readonly Row[], budget: number): Row[][] {
  const chunks: Row[][] = [];
  let current: Row[] = [];
  let longest = 0;
  for (const row of rows) {
    const length = row.input.ids.length;
    const grown = Math.max(longest, length);
    if (current.length > 0 && grown * (current.length + 1) > budget) {
      chunks.push(current);
      current = [];
      longest = 0;
    }
    current.push(row);
    longest = Math.max(longest, length);
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

export const tokenClassification: FamilyAdapter<'token-classification'> = {
  name: 'token-classification',
  ...tokenClassificationSpec,

  async detectOptions(evidence, maybeTokenizer) {
    const tokenizer = requireTokenizer(maybeTokenizer, evidence.folder.dir);
    const tokenizerJson = await evidence.folder.json('tokenizer.json', TokenizerModelJson);
    const prefix = tokenizerJson?.model.continuing_subword_prefix;
    const unkToken = tokenizer.info.unkToken;
    const detected: Record<string, unknown> = {
      subwords: prefix !== undefined && prefix !== null && prefix !== '' ? 'length' : 'space',
      unkId: unkToken === null ? null : (tokenizer.tokenToId(unkToken) ?? null),
      ...templateEdges(tokenizer),
    };
    const labels = labelsFromConfig(evidence.config);
    if (labels !== undefined) detected.labels = labels;
    return detected;
  },

  prepare: prepareTokens,

  async createRunner(context) {
    const options = optionsOf(context.profile.id, context.profile.options);
    return openRunner(context, (created) => new TokenClassificationRunner(context.profile, created, options));
  },
};
