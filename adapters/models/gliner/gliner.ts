import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { CreatedSession } from '../../runtime/ort-session.js';
import { floatOutput, runChecked } from '../../runtime/tensors.js';
import type { TextTokenizer } from '../../tokenizers/text-tokenizer.js';
import type { FamilyAdapter, ItemOutput, PrepContext, Prepared, PreparedGliner, PrepareRequest, RunOptions } from '../family.js';
import { requireTokenizer } from '../family.js';
import { GlinerConfig } from '../model-files.js';
import type { ModelProfile } from '../profile.js';
import { familyOptions, openRunner, SessionRunner } from '../text/text-runner.js';
import { collectCandidates, decodeFlat, toEntities, type SpanCandidate } from './gliner-decode.js';
import { collateGliner, prepareGlinerItem, promptIds, windowRow } from './gliner-input.js';
import { glinerSpec } from './spec.js';

/**
 * GLiNER zero-shot span NER (urchade/gliner_*, knowledgator span models): the request's labels
 * are written into the prompt, the graph scores every span of up to max_width words against
 * every label, and spans above the threshold are decoded greedily into non-overlapping entities.
 */

export const GlinerOptions = z.strictObject({
  entTokenId: z.number().int().nonnegative(),
  sepTokenId: z.number().int().nonnegative(),
  /** Longest span in words (gliner_config max_width); fixed by the graph. */
  maxWidth: z.number().int().positive().default(12),
  /** Words one sequence holds (gliner_config max_len); longer texts are read in windows. */
  maxWords: z.number().int().positive().default(384),
  /** Words shared by consecutive windows; default 2 × maxWidth. */
  overlapWords: z.number().int().nonnegative().optional(),
  spanMode: z.string().default('markerV0'),
  wordsSplitter: z.string().default('whitespace'),
});
export type GlinerOptions = z.infer<typeof GlinerOptions>;

export const DEFAULT_THRESHOLD = 0.5;

/** Padded tokens and logits per ONNX run: a long text's many windows are run a slice at a time. */
const MAX_RUN_TOKENS = 16_384;
const MAX_RUN_LOGITS = 8_000_000;

function glinerOptions(profile: ModelProfile): GlinerOptions {
  const options = familyOptions(GlinerOptions, profile, 'gliner');
  if (options.spanMode === 'token_level') {
    throw new ShoalError(
      ErrorCode.MODEL_LOAD_FAILED,
      `${profile.id}: token-level GLiNER (span_mode token_level) is not supported; Shoal runs span-level GLiNER exports (span_idx / span_mask inputs)`,
    );
  }
  if (options.wordsSplitter !== 'whitespace') {
    throw new ShoalError(
      ErrorCode.MODEL_LOAD_FAILED,
      `${profile.id}: words_splitter_type "${options.wordsSplitter}" is not supported; Shoal splits words like GLiNER's "whitespace" splitter (set options.wordsSplitter: whitespace in the catalog to accept that)`,
    );
  }
  return options;
}

function markerId(tokenizer: TextTokenizer, token: string, dir: string): number {
  const id = tokenizer.tokenToId(token);
  if (id === undefined) {
    throw new ShoalError(
      ErrorCode.MODEL_LOAD_FAILED,
      `tokenizer.json in ${dir} has no "${token}" token, which gliner_config.json names; export the tokenizer with GLiNER's added tokens`,
    );
  }
  return id;
}

function prepareGliner(context: PrepContext, request: PrepareRequest): PreparedGliner[] {
  const { profile } = context;
  const tokenizer = requireTokenizer(context.tokenizer, profile.id);
  const options = glinerOptions(profile);
  const labels = request.labels;
  // Tokenize requests carry no labels: they show how the text itself is read.
  if ((labels === undefined || labels.length === 0) && request.task !== 'tokenize') {
    throw new ShoalError(
      ErrorCode.INVALID_INPUT,
      `${profile.id} is a zero-shot extractor: name the entity types to find in "labels" (e.g. ["person", "organization"])`,
    );
  }
  const tokens = { entTokenId: options.entTokenId, sepTokenId: options.sepTokenId };
  const prompt = labels === undefined || labels.length === 0 ? [] : promptIds(tokenizer, labels, tokens);
  const itemOptions = {
    ...tokens,
    maxLength: request.maxLength,
    maxWords: options.maxWords,
    maxWidth: options.maxWidth,
    overlapWords: options.overlapWords ?? 2 * options.maxWidth,
  };
  return request.items.map((item) => prepareGlinerItem(tokenizer, item.text, labels ?? [], prompt, itemOptions));
}

function requireGlinerBatch(batch: readonly Prepared[]): PreparedGliner[] {
  return batch.map((item) => {
    if (item.kind !== 'gliner') throw new ShoalError(ErrorCode.INTERNAL, 'gliner received non-gliner items');
    return item;
  });
}

interface WindowRef {
  item: number;
  window: number;
  tokens: number;
  words: number;
}

/** Slices of rows within the per-run token and logits budgets; a row alone is always allowed. */
function chunkRows(rows: readonly WindowRef[], maxWidth: number, labels: number): WindowRef[][] {
  const chunks: WindowRef[][] = [];
  let current: WindowRef[] = [];
  let longest = 0;
  let widest = 0;
  for (const row of rows) {
    const count = current.length + 1;
    const tokens = Math.max(longest, row.tokens);
    const words = Math.max(widest, row.words);
    if (current.length > 0 && (count * tokens > MAX_RUN_TOKENS || count * words * maxWidth * labels > MAX_RUN_LOGITS)) {
      chunks.push(current);
      current = [];
      longest = 0;
      widest = 0;
    }
    current.push(row);
    longest = Math.max(longest, row.tokens);
    widest = Math.max(widest, row.words);
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

/** The graph must take span_idx: token-level exports score tokens, not spans. */
function requireSpanInputs(profile: ModelProfile, created: CreatedSession): void {
  const inputs = created.session.inputNames;
  if (!inputs.includes('span_idx')) {
    throw new ShoalError(
      ErrorCode.MODEL_LOAD_FAILED,
      `${profile.id}: the ONNX graph has no span_idx input (inputs: ${inputs.join(', ')}); Shoal runs span-level GLiNER exports`,
    );
  }
}

class GlinerRunner extends SessionRunner {
  readonly #options: GlinerOptions;
  readonly #padId: number;

  constructor(profile: ModelProfile, created: CreatedSession, options: GlinerOptions) {
    requireSpanInputs(profile, created);
    super(profile, created, { holds: 'span logits', preferred: ['logits'] }, () => null);
    this.#options = options;
    this.#padId = profile.tokenizer?.padId ?? 0;
  }

  async run(batch: Prepared[], options: RunOptions): Promise<ItemOutput[]> {
    const items = requireGlinerBatch(batch);
    const threshold = options.threshold ?? DEFAULT_THRESHOLD;
    const candidates = items.map((): SpanCandidate[] => []);
    // The graph takes one label count per batch: rows run together only when their labels match.
    const groups = new Map<string, WindowRef[]>();
    items.forEach((item, i) => {
      const key = JSON.stringify(item.labels);
      let group = groups.get(key);
      if (group === undefined) {
        group = [];
        groups.set(key, group);
      }
      item.windows.forEach((window, w) => {
        group.push({ item: i, window: w, tokens: window.tokens[1] - window.tokens[0], words: window.wordCount });
      });
    });
    for (const rows of groups.values()) {
      const first = items[rows[0]?.item ?? 0];
      const labels = first?.labels.length ?? 0;
      rows.sort((a, b) => b.tokens - a.tokens);
      for (const chunk of chunkRows(rows, this.#options.maxWidth, labels)) {
        await this.#runChunk(items, chunk, labels, threshold, candidates);
      }
    }
    return items.map((item, i) => ({ entities: toEntities(decodeFlat(candidates[i] ?? [], item.words.length), item) }));
  }

  async #runChunk(items: PreparedGliner[], chunk: WindowRef[], labels: number, threshold: number, candidates: SpanCandidate[][]): Promise<void> {
    const id = this.profile.id;
    const rows = chunk.map((ref) => {
      const item = items[ref.item];
      const window = item?.windows[ref.window];
      if (item === undefined || window === undefined) throw new ShoalError(ErrorCode.INTERNAL, 'gliner window out of range');
      return windowRow(item, window);
    });
    const batch = collateGliner(rows, this.#padId, this.#options.maxWidth);
    const logits = floatOutput(await runChecked(this.session, batch.feeds, id), this.output, id);
    const expected = [rows.length, batch.maxWords, this.#options.maxWidth, labels];
    if (logits.dims.length !== 4 || expected.some((size, k) => logits.dims[k] !== size)) {
      throw new ShoalError(
        ErrorCode.INFERENCE_FAILED,
        `${id}: span logits have shape [${logits.dims.join(', ')}], expected [${expected.join(', ')}] (check max_width in gliner_config.json)`,
      );
    }
    chunk.forEach((ref, row) => {
      const item = items[ref.item];
      const out = candidates[ref.item];
      if (item !== undefined && out !== undefined) collectCandidates({ logits, row }, item, ref.window, threshold, out);
    });
  }
}

export const gliner: FamilyAdapter<'gliner'> = {
  name: 'gliner',
  ...glinerSpec,

  async detectOptions(evidence, maybeTokenizer) {
    const tokenizer = requireTokenizer(maybeTokenizer, evidence.folder.dir);
    const config = await evidence.folder.json('gliner_config.json', GlinerConfig);
    if (config === undefined) {
      throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${evidence.folder.dir}: gliner_config.json is missing`);
    }
    return {
      entTokenId: markerId(tokenizer, config.ent_token, evidence.folder.dir),
      sepTokenId: markerId(tokenizer, config.sep_token, evidence.folder.dir),
      maxWidth: config.max_width,
      maxWords: config.max_len,
      spanMode: config.span_mode,
      wordsSplitter: config.words_splitter_type,
    };
  },

  prepare: prepareGliner,

  async createRunner(context) {
    const options = glinerOptions(context.profile);
    return openRunner(context, (created) => new GlinerRunner(context.profile, created, options));
  },
};
