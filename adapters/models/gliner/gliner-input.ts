import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { ort } from '../../runtime/ort-session.js';
import { boolTensor, int64Tensor } from '../../runtime/tensors.js';
import type { Span } from '../../tokenizers/offsets.js';
import { applyTemplate } from '../../tokenizers/template.js';
import type { TextTokenizer } from '../../tokenizers/text-tokenizer.js';
import type { GlinerWindow, PreparedGliner } from '../family.js';

/**
 * GLiNER inputs: the text is split into words the way GLiNER's whitespace splitter does, every
 * prompt item (<<ENT>>, label, ..., <<SEP>>) and every word is tokenized on its own, and the
 * pieces are joined between the tokenizer's special tokens. A text longer than one sequence
 * (max_len words, or the token limit) becomes several overlapping windows of words, so no word
 * is dropped; the decoder merges their spans.
 */

/**
 * Python's `\w+(?:[-_]\w+)*|\S`. Python's `\w` is Unicode letters, digits and `_` (not marks);
 * its whitespace set, unlike JavaScript's `\s`, holds \x1c-\x1f and \x85 but not \ufeff.
 */
const WORD =
  /[\p{L}\p{N}_]+(?:[-_][\p{L}\p{N}_]+)*|[^\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/gu;

export function splitWords(text: string): Span[] {
  const spans: Span[] = [];
  for (const match of text.matchAll(WORD)) {
    const start = match.index ?? 0;
    spans.push([start, start + match[0].length]);
  }
  return spans;
}

/** Words repeat a lot in real text: their ids are cached per tokenizer (bounded, cleared when full). */
const WORD_CACHE_LIMIT = 65_536;
const WORD_CACHE_MAX_CHARS = 64;
const wordCaches = new WeakMap<TextTokenizer, Map<string, number[]>>();

function wordIds(tokenizer: TextTokenizer, word: string): number[] {
  if (word.length > WORD_CACHE_MAX_CHARS) return tokenizer.segmentIds(word);
  let cache = wordCaches.get(tokenizer);
  if (cache === undefined) {
    cache = new Map();
    wordCaches.set(tokenizer, cache);
  }
  let ids = cache.get(word);
  if (ids === undefined) {
    ids = tokenizer.segmentIds(word);
    if (cache.size >= WORD_CACHE_LIMIT) cache.clear();
    cache.set(word, ids);
  }
  return ids;
}

export interface GlinerTokens {
  entTokenId: number;
  sepTokenId: number;
}

/** <<ENT>> label_1 <<ENT>> label_2 ... <<SEP>>; each label is one item, however many words it has. */
export function promptIds(tokenizer: TextTokenizer, labels: readonly string[], tokens: GlinerTokens): number[] {
  const ids: number[] = [];
  for (const label of labels) {
    const labelIds = tokenizer.segmentIds(label);
    // The graph counts labels by <<ENT>> tokens: a label holding one would shift every class.
    if (labelIds.includes(tokens.entTokenId) || labelIds.includes(tokens.sepTokenId)) {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `label "${label}" contains a GLiNER marker token (<<ENT>> or <<SEP>>); remove it from the label`);
    }
    ids.push(tokens.entTokenId, ...labelIds);
  }
  ids.push(tokens.sepTokenId);
  return ids;
}

export interface WordRange {
  first: number;
  end: number;
}

export interface WindowLimits {
  /** Tokens a window's words may take. */
  budget: number;
  maxWords: number;
  /**
   * Words consecutive windows share, as far as the budget allows; never more than half a window
   * unless half is less than spanWords - 1 (small windows would otherwise lose long spans).
   */
  overlapWords: number;
  /** Longest span in words: an overlap of spanWords - 1 puts every span whole in some window. */
  spanWords: number;
}

/**
 * Cuts words (token counts `lengths`) into windows within `limits`. Consecutive windows overlap
 * so that a span cut by one window's edge lies whole, with context, in the next; every window
 * ends past the previous one; a single word longer than the budget gets a window of its own.
 */
export function planWindows(lengths: readonly number[], limits: WindowLimits): WordRange[] {
  const { budget, maxWords } = limits;
  const prefix = new Array<number>(lengths.length + 1).fill(0);
  lengths.forEach((length, i) => {
    prefix[i + 1] = (prefix[i] ?? 0) + length;
  });
  const tokensIn = (first: number, end: number): number => (prefix[end] ?? 0) - (prefix[first] ?? 0);
  const windows: WordRange[] = [];
  let first = 0;
  while (first < lengths.length) {
    let end = first;
    while (end < lengths.length && end - first < maxWords) {
      if (end > first && tokensIn(first, end + 1) > budget) break;
      end++;
    }
    windows.push({ first, end });
    if (end >= lengths.length) break;
    const next = lengths[end] ?? 0;
    const count = end - first;
    let keep = Math.min(limits.overlapWords, Math.max(Math.floor(count / 2), limits.spanWords - 1), count - 1);
    while (keep > 0 && (tokensIn(end - keep, end) + next > budget || keep + 1 > maxWords)) keep--;
    first = end - keep;
  }
  return windows;
}

export interface GlinerItemOptions extends GlinerTokens {
  /** Tokens one window may hold, special tokens included. */
  maxLength: number;
  /** Words one window may hold (gliner_config max_len). */
  maxWords: number;
  overlapWords: number;
  /** Longest span in words (max_width). */
  maxWidth: number;
}

export function prepareGlinerItem(
  tokenizer: TextTokenizer,
  text: string,
  labels: string[],
  prompt: readonly number[],
  options: GlinerItemOptions,
): PreparedGliner {
  const words = splitWords(text);
  const pieces = words.map(([start, end]) => wordIds(tokenizer, text.slice(start, end)));
  const specials = tokenizer.specialCount(false);
  const budget = options.maxLength - specials - prompt.length;
  if (budget < 1) {
    throw new ShoalError(
      ErrorCode.INVALID_INPUT,
      `the ${labels.length} labels take ${prompt.length} tokens, which leaves no room for text within max_length ${options.maxLength}; use fewer or shorter labels`,
    );
  }
  const plan = planWindows(pieces.map((piece) => piece.length), {
    budget,
    maxWords: options.maxWords,
    overlapWords: options.overlapWords,
    spanWords: options.maxWidth,
  });
  const ids: number[] = [];
  const wordsMask: number[] = [];
  const windows: GlinerWindow[] = [];
  let truncated = false;
  for (const range of plan) {
    const content = [...prompt];
    const contentMask = new Array<number>(prompt.length).fill(0);
    for (let k = range.first; k < range.end; k++) {
      let piece = pieces[k] ?? [];
      const room = budget - (content.length - prompt.length);
      if (piece.length > room) {
        // Only a word alone in its window gets here. GLiNER reads a word through its first
        // sub-token, so the word stays; its trailing sub-tokens are lost.
        piece = piece.slice(0, room);
        truncated = true;
      }
      piece.forEach((id, j) => {
        content.push(id);
        contentMask.push(j === 0 ? k - range.first + 1 : 0);
      });
    }
    const templated = applyTemplate(tokenizer.info.template, content);
    const start = ids.length;
    let c = 0;
    templated.ids.forEach((id, t) => {
      ids.push(id);
      wordsMask.push(templated.specialMask[t] === 1 ? 0 : (contentMask[c++] ?? 0));
    });
    windows.push({ tokens: [start, ids.length], firstWord: range.first, wordCount: range.end - range.first });
  }
  const length = specials + prompt.length + pieces.reduce((sum, piece) => sum + piece.length, 0);
  return { kind: 'gliner', ids, wordsMask, windows, words, text, labels, truncated, length };
}

/** One sequence of a GLiNER batch: a window's token ids, words mask and word count. */
export interface GlinerRow {
  ids: readonly number[];
  wordsMask: readonly number[];
  wordCount: number;
}

export function windowRow(item: PreparedGliner, window: GlinerWindow): GlinerRow {
  const [start, end] = window.tokens;
  return { ids: item.ids.slice(start, end), wordsMask: item.wordsMask.slice(start, end), wordCount: window.wordCount };
}

export interface GlinerBatch {
  feeds: Record<string, ort.Tensor>;
  /** Words per row of span_idx / logits (the batch's largest word count). */
  maxWords: number;
}

/**
 * The span graph's inputs for rows padded on the right (absolute positions: no left padding).
 * span_idx row s*maxWidth + w holds (s, s + w) where that span ends inside the row's words,
 * else (0, 0) with span_mask false.
 */
export function collateGliner(rows: readonly GlinerRow[], padId: number, maxWidth: number): GlinerBatch {
  const batchSize = rows.length;
  let seqLen = 1;
  let maxWords = 1;
  for (const row of rows) {
    seqLen = Math.max(seqLen, row.ids.length);
    maxWords = Math.max(maxWords, row.wordCount);
  }
  const ids = new BigInt64Array(batchSize * seqLen).fill(BigInt(padId));
  const mask = new BigInt64Array(batchSize * seqLen);
  const wordsMask = new BigInt64Array(batchSize * seqLen);
  const textLengths = new BigInt64Array(batchSize);
  const spans = maxWords * maxWidth;
  const spanIdx = new BigInt64Array(batchSize * spans * 2);
  const spanMask = new Uint8Array(batchSize * spans);
  rows.forEach((row, b) => {
    for (let t = 0; t < row.ids.length; t++) {
      ids[b * seqLen + t] = BigInt(row.ids[t] ?? padId);
      mask[b * seqLen + t] = 1n;
      wordsMask[b * seqLen + t] = BigInt(row.wordsMask[t] ?? 0);
    }
    textLengths[b] = BigInt(row.wordCount);
    for (let s = 0; s < row.wordCount; s++) {
      for (let w = 0; w < maxWidth && s + w < row.wordCount; w++) {
        const span = b * spans + s * maxWidth + w;
        spanIdx[span * 2] = BigInt(s);
        spanIdx[span * 2 + 1] = BigInt(s + w);
        spanMask[span] = 1;
      }
    }
  });
  const dims = [batchSize, seqLen];
  return {
    maxWords,
    feeds: {
      input_ids: int64Tensor(ids, dims),
      attention_mask: int64Tensor(mask, dims),
      words_mask: int64Tensor(wordsMask, dims),
      text_lengths: int64Tensor(textLengths, [batchSize, 1]),
      span_idx: int64Tensor(spanIdx, [batchSize, spans, 2]),
      span_mask: boolTensor(spanMask, [batchSize, spans]),
    },
  };
}
