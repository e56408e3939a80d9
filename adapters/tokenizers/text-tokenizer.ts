import { Tokenizer } from '@huggingface/tokenizers';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { locateTokens, type Span, type SurfaceRule } from './offsets.js';
import { applyTemplate, specialTokenCount, templateFromPostProcessor, type SpecialTemplate } from './template.js';
import { readTokenizerFiles, type TokenizerFiles } from './tokenizer-files.js';
import { cut, longestFirstLengths, type TruncationSide } from './truncation.js';
import { WordPieceFast } from './wordpiece-fast.js';

/**
 * A Hugging Face tokenizer (tokenizer.json) plus what @huggingface/tokenizers leaves out:
 * truncation that keeps special tokens (longest-first for pairs), pair templates, padding
 * facts, offsets, and a fast path for texts far longer than the model can read.
 */

export type PaddingSide = 'left' | 'right';

export interface EncodeOptions {
  /** Total length including special tokens. */
  maxLength: number;
  /** Second segment (cross-encoders). */
  pair?: string;
  /** Add the template's special tokens (default true). */
  addSpecialTokens?: boolean;
  /** Count the full length of over-long texts instead of stopping early (slower). */
  exactLength?: boolean;
}

export interface Encoded {
  ids: number[];
  typeIds: number[];
  specialMask: number[];
  truncated: boolean;
  /** Length with special tokens before truncation (a lower bound when the fast path stopped early). */
  length: number;
}

export interface EncodedWithOffsets extends Encoded {
  tokens: string[];
  /** Character span in the original text per token; [0, 0] for special tokens. */
  offsets: Span[];
}

export interface TextTokenizerInfo {
  padId: number;
  paddingSide: PaddingSide;
  truncationSide: TruncationSide;
  template: SpecialTemplate;
  modelMaxLength: number | null;
  unkToken: string | null;
  vocabSize: number;
}

/** A text this many characters per token longer than the budget is cut before tokenizing. */
const FAST_PATH_CHARS_PER_TOKEN = 12;
const FAST_PATH_MIN_CHARS = 4096;

/** Transformers writes 1e30-ish sentinels for "no limit" into model_max_length. */
const NO_LIMIT = 1_000_000;

function surfaceRule(files: TokenizerFiles): SurfaceRule {
  const model = files.json.model;
  if (model.type === 'WordPiece') return { kind: 'wordpiece', continuingPrefix: model.continuing_subword_prefix ?? '##' };
  const pre = JSON.stringify(files.json.pre_tokenizer ?? null);
  if (pre.includes('"ByteLevel"')) return { kind: 'bytelevel' };
  if (pre.includes('"Metaspace"')) return { kind: 'metaspace', replacement: '\u2581' };
  return { kind: 'plain', endOfWordSuffix: model.end_of_word_suffix ?? null };
}

export class TextTokenizer {
  readonly info: TextTokenizerInfo;
  readonly #tokenizer: Tokenizer;
  readonly #rule: SurfaceRule;
  readonly #specialIds: Set<number>;
  /** Exact ids for BERT WordPiece tokenizers, several times faster than the library's encode. */
  readonly #fast: WordPieceFast | null;

  private constructor(files: TokenizerFiles) {
    try {
      this.#tokenizer = new Tokenizer(files.raw, files.rawConfig);
    } catch (error) {
      throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `tokenizer.json could not be loaded: ${String(error)}`, { cause: error });
    }
    const lookup = (token: string): number | undefined => this.#tokenizer.token_to_id(token);
    const template = templateFromPostProcessor(files.json.post_processor, lookup);
    this.#specialIds = new Set(files.json.added_tokens.filter((t) => t.special).map((t) => t.id));
    this.#rule = surfaceRule(files);
    this.#fast = WordPieceFast.fromFiles(files, this.#tokenizer.model?.tokens_to_ids);
    const padToken = files.config.pad_token ?? files.json.padding?.pad_token;
    const padId =
      (padToken === undefined ? undefined : lookup(padToken)) ?? files.json.padding?.pad_id ?? 0;
    const declaredMax = files.config.model_max_length;
    this.info = Object.freeze({
      padId,
      paddingSide: files.config.padding_side ?? (files.json.padding?.direction === 'Left' ? 'left' : 'right'),
      truncationSide: files.config.truncation_side ?? 'right',
      template,
      modelMaxLength: declaredMax !== undefined && declaredMax < NO_LIMIT ? declaredMax : null,
      unkToken: files.json.model.unk_token ?? files.config.unk_token ?? null,
      vocabSize: this.#tokenizer.get_vocab(true).size,
    });
  }

  static async load(dir: string, configOverrides: Record<string, unknown> = {}): Promise<TextTokenizer> {
    return new TextTokenizer(await readTokenizerFiles(dir, configOverrides));
  }

  static fromFiles(files: TokenizerFiles): TextTokenizer {
    return new TextTokenizer(files);
  }

  tokenToId(token: string): number | undefined {
    return this.#tokenizer.token_to_id(token);
  }

  idToToken(id: number): string | undefined {
    return this.#tokenizer.id_to_token(id);
  }

  isSpecialId(id: number): boolean {
    return this.#specialIds.has(id);
  }

  decode(ids: readonly number[], skipSpecialTokens = true): string {
    if (ids.length === 0) return '';
    return this.#tokenizer.decode([...ids], { skip_special_tokens: skipSpecialTokens });
  }

  specialCount(paired: boolean): number {
    return specialTokenCount(this.info.template, paired);
  }

  /** Token ids of `text` without special tokens. */
  segmentIds(text: string): number[] {
    if (text.length === 0) return [];
    return this.#fast?.ids(text) ?? this.#tokenizer.encode(text, { add_special_tokens: false }).ids;
  }

  segmentTokens(text: string): string[] {
    if (text.length === 0) return [];
    return this.#tokenizer.encode(text, { add_special_tokens: false }).tokens;
  }

  /**
   * Ids of `text` when at most `budget` of them will be kept: a very long text is tokenized on a
   * prefix cut at whitespace, grown until it yields more than `budget` tokens, so a 1 MB document
   * costs what its first few thousand characters cost. Returns whether the prefix was enough.
   */
  #boundedSegmentIds(text: string, budget: number): { ids: number[]; complete: boolean } {
    let window = Math.max(FAST_PATH_MIN_CHARS, (budget + 1) * FAST_PATH_CHARS_PER_TOKEN);
    while (window < text.length) {
      // Cut before a whitespace character so the last word of the prefix is whole.
      let end = window;
      while (end > window / 2 && !/\s/u.test(text[end] ?? '')) end--;
      if (end <= window / 2) break;
      const ids = this.segmentIds(text.slice(0, end));
      if (ids.length > budget) return { ids, complete: false };
      window *= 2;
    }
    return { ids: this.segmentIds(text), complete: true };
  }

  encode(text: string, options: EncodeOptions): Encoded {
    const addSpecial = options.addSpecialTokens ?? true;
    const paired = options.pair !== undefined;
    const special = addSpecial ? this.specialCount(paired) : 0;
    const budget = Math.max(0, options.maxLength - special);
    const side = this.info.truncationSide;
    let a: number[];
    let b: number[] | undefined;
    let lengthKnown = true;
    if (options.pair === undefined) {
      if (options.exactLength === true || side === 'left') {
        a = this.segmentIds(text);
      } else {
        const bounded = this.#boundedSegmentIds(text, budget);
        a = bounded.ids;
        lengthKnown = bounded.complete;
      }
    } else {
      a = this.segmentIds(text);
      b = this.segmentIds(options.pair);
    }
    const fullLength = a.length + (b?.length ?? 0) + special;
    let truncated = !lengthKnown;
    if (b === undefined) {
      if (a.length > budget) {
        a = cut(a, budget, side);
        truncated = true;
      }
    } else {
      const [keepA, keepB] = longestFirstLengths(a.length, b.length, budget);
      if (keepA < a.length || keepB < b.length) truncated = true;
      a = cut(a, keepA, side);
      b = cut(b, keepB, side);
    }
    if (!addSpecial) {
      return { ids: a, typeIds: new Array<number>(a.length).fill(0), specialMask: new Array<number>(a.length).fill(0), truncated, length: fullLength };
    }
    const templated = applyTemplate(this.info.template, a, b);
    return { ...templated, truncated, length: fullLength };
  }

  /** Single-text encoding with tokens and original-text character offsets (token classification). */
  encodeWithOffsets(text: string, maxLength: number): EncodedWithOffsets {
    const tokens = this.segmentTokens(text);
    const spans = locateTokens(text, tokens, this.#rule, this.info.unkToken);
    const budget = Math.max(0, maxLength - this.specialCount(false));
    const keep = Math.min(tokens.length, budget);
    const keptTokens = cut(tokens, keep, this.info.truncationSide);
    const keptSpans = cut(spans, keep, this.info.truncationSide);
    const ids = keptTokens.map((token) => this.tokenToId(token) ?? this.tokenToId(this.info.unkToken ?? '') ?? 0);
    const templated = applyTemplate(this.info.template, ids);
    const allTokens: string[] = [];
    const offsets: Span[] = [];
    let k = 0;
    for (let i = 0; i < templated.ids.length; i++) {
      if (templated.specialMask[i] === 1) {
        allTokens.push(this.idToToken(templated.ids[i] ?? 0) ?? '');
        offsets.push([0, 0]);
      } else {
        allTokens.push(keptTokens[k] ?? '');
        offsets.push(keptSpans[k] ?? [0, 0]);
        k++;
      }
    }
    return {
      ...templated,
      tokens: allTokens,
      offsets,
      truncated: keep < tokens.length,
      length: tokens.length + this.specialCount(false),
    };
  }
}
