import type { Engine } from '../../adapters/protocol/engine.js';
import type { ParsedPage } from './document.js';

/**
 * Token-aware chunking with the encoder's own tokenizer. A page's text is cut into sentences
 * (inside paragraphs); every sentence of a document is counted in one batched tokenize call (a
 * second one counts the words of sentences longer than a chunk), then sentences are packed
 * greedily up to `size` tokens, preferring to end a chunk where a paragraph ends, and the next
 * chunk repeats whole trailing sentences worth at most `overlap` tokens. Chunks never span pages,
 * so each has one page number; `start`/`end` are character offsets in that page's text.
 */

/**
 * The chunking rules' version, part of the settings hash (identity.ts), so documents chunked
 * under older rules are chunked again once. 2: a word longer than a chunk is cut; CJK sentences
 * end without a space; an overlap never makes a chunk alone; a chunk opening with a heading
 * falls under it.
 */
export const CHUNK_RULES = 2;

export interface ChunkSettings {
  /** Tokens per chunk, special tokens not counted. */
  size: number;
  /** Tokens of trailing sentences repeated at the start of the next chunk. */
  overlap: number;
}

export interface TextChunk {
  /** 0-based position in the document. */
  index: number;
  page: number;
  start: number;
  end: number;
  text: string;
  tokens: number;
  heading: string | null;
}

/** Counts tokens of many texts at once (special tokens excluded). */
export type TokenCounter = (texts: readonly string[]) => Promise<number[]>;

/** Texts per tokenize request: large enough to amortize the call, small enough for one message. */
const TOKENIZE_BATCH = 2_048;
/**
 * Characters per tokenize request: the request (and its reply of ids and token strings) stays far
 * under a NATS message (1 MiB by default) and the 1,000,000-character item limit, whatever the texts.
 */
const TOKENIZE_BATCH_CHARS = 65_536;

/**
 * Longest unit (sentence, or piece of one) in characters. A run with no sentence end (a log line,
 * a table flattened to one line, a 10 MB base64 blob) is cut here, at whitespace where there is
 * some, before anything is tokenized: one tokenize item of it was over the request limit and
 * failed the whole ingest. 8,192 characters is well over a chunk of any encoder (≥ 2,000 tokens).
 */
export const MAX_UNIT_CHARS = 8_192;
/**
 * Longest chunk text in characters. Units that count no tokens (characters the tokenizer drops)
 * or words across a long gap of whitespace would otherwise pack into a chunk of any length.
 */
export const MAX_CHUNK_CHARS = 4 * MAX_UNIT_CHARS;

/** `texts` cut into consecutive batches of at most TOKENIZE_BATCH items and TOKENIZE_BATCH_CHARS characters (a longer text goes alone). */
function tokenizeBatches(texts: readonly string[]): string[][] {
  const batches: string[][] = [];
  let current: string[] = [];
  let chars = 0;
  for (const text of texts) {
    if (current.length > 0 && (current.length >= TOKENIZE_BATCH || chars + text.length > TOKENIZE_BATCH_CHARS)) {
      batches.push(current);
      current = [];
      chars = 0;
    }
    current.push(text);
    chars += text.length;
  }
  if (current.length > 0) batches.push(current);
  return batches;
}

/** A TokenCounter over `engine.tokenize` for `model`, with the count of special tokens subtracted. */
export function engineTokenCounter(engine: Engine, model: string, signal?: AbortSignal): TokenCounter {
  let specials: Promise<number> | null = null;
  const call = async (texts: readonly string[]): Promise<number[]> => {
    const result = await engine.tokenize({ model, items: texts.map((text) => ({ text, role: 'document' as const })) }, signal === undefined ? {} : { signal });
    const lengths = new Array<number>(texts.length).fill(0);
    for (const item of result.items) lengths[item.index] = item.length;
    return lengths;
  };
  return async (texts) => {
    if (texts.length === 0) return [];
    specials ??= call(['']).then((lengths) => lengths[0] ?? 0);
    const overhead = await specials;
    const out: number[] = [];
    for (const batch of tokenizeBatches(texts)) {
      const lengths = await call(batch);
      for (const length of lengths) out.push(Math.max(0, length - overhead));
    }
    return out;
  };
}

/**
 * Content tokens the model reads before it truncates (its max length minus special tokens), found
 * by tokenizing one text longer than any model's limit; null when nothing was truncated. Chunks
 * are never made longer than this, so no chunk text is silently cut by the encoder.
 */
export async function encoderTokenLimit(engine: Engine, model: string, signal?: AbortSignal): Promise<number | null> {
  const probe = 'a '.repeat(40_000);
  const result = await engine.tokenize({ model, items: [{ text: '', role: 'document' }, { text: probe, role: 'document' }] }, signal === undefined ? {} : { signal });
  const empty = result.items.find((item) => item.index === 0);
  const long = result.items.find((item) => item.index === 1);
  if (empty === undefined || long === undefined || !long.truncated) return null;
  return Math.max(1, long.ids.length - empty.length);
}

interface Unit {
  page: number;
  start: number;
  end: number;
  /** First unit of a paragraph. */
  opensParagraph: boolean;
  tokens: number;
}

const PARAGRAPH_BREAK = /\n[ \t]*\n/g;
/**
 * A sentence ends at . ! ? possibly followed by quotes or brackets, then whitespace; or at their
 * CJK forms, which need no space after them (Chinese and Japanese put none).
 */
const SENTENCE_END = /[.!?]['")\]]*\s+|[。！？]['")\]」』）]*\s*/g;

function trimmedRange(text: string, start: number, end: number): [number, number] | null {
  let s = start;
  let e = end;
  while (s < e && /\s/.test(text[s] ?? '')) s += 1;
  while (e > s && /\s/.test(text[e - 1] ?? '')) e -= 1;
  return s < e ? [s, e] : null;
}

/** Where to end a piece of [start, end) at most MAX_UNIT_CHARS long: the last whitespace in its second half, else the limit (never inside a surrogate pair). */
function pieceEnd(text: string, start: number, end: number): number {
  const limit = start + MAX_UNIT_CHARS;
  if (end <= limit) return end;
  for (let at = limit; at > start + MAX_UNIT_CHARS / 2; at -= 1) if (/\s/.test(text[at] ?? '')) return at;
  const code = text.charCodeAt(limit - 1);
  return code >= 0xd800 && code <= 0xdbff ? limit + 1 : limit;
}

/**
 * Sentence ranges of a page, each marked when it opens a paragraph, none longer than
 * MAX_UNIT_CHARS, appended to `units` (one array for the whole document, not one per page to be
 * flattened) with no tokens yet.
 */
function sentenceUnits(page: ParsedPage, units: Unit[]): void {
  const text = page.text;
  const paragraphs: [number, number][] = [];
  let from = 0;
  for (const match of text.matchAll(PARAGRAPH_BREAK)) {
    paragraphs.push([from, match.index]);
    from = match.index + match[0].length;
  }
  paragraphs.push([from, text.length]);
  for (const [pStart, pEnd] of paragraphs) {
    const paragraph = text.slice(pStart, pEnd);
    let sentenceFrom = 0;
    let opens = true;
    const push = (s: number, e: number): void => {
      let from = pStart + s;
      while (from < pStart + e) {
        const to = pieceEnd(text, from, pStart + e);
        const range = trimmedRange(text, from, to);
        from = to;
        if (range === null) continue;
        units.push({ page: page.page, start: range[0], end: range[1], opensParagraph: opens, tokens: 0 });
        opens = false;
      }
    };
    for (const match of paragraph.matchAll(SENTENCE_END)) {
      push(sentenceFrom, match.index + match[0].length);
      sentenceFrom = match.index + match[0].length;
    }
    push(sentenceFrom, paragraph.length);
  }
}

interface Word {
  /** The long unit it belongs to (its position among them). */
  owner: number;
  start: number;
  end: number;
  text: string;
  tokens: number;
}

/** Rounds of cutting a word longer than a chunk; each round cuts pieces still too long again. */
const MAX_CUT_ROUNDS = 6;

/** `word` cut into `pieces` runs of about equal length, never inside a surrogate pair. */
function cutWord(word: Word, pieces: number): Word[] {
  const out: Word[] = [];
  const length = word.text.length;
  let from = 0;
  for (let p = 1; p <= pieces && from < length; p++) {
    let to = p === pieces ? length : Math.max(from + 1, Math.round((length * p) / pieces));
    const code = word.text.charCodeAt(to - 1);
    if (to < length && code >= 0xd800 && code <= 0xdbff) to += 1;
    out.push({ owner: word.owner, start: word.start + from, end: word.start + to, text: word.text.slice(from, to), tokens: 0 });
    from = to;
  }
  return out;
}

/**
 * Words longer than a chunk (a URL, base64, a line of Chinese or Japanese without spaces) cut
 * into pieces of at most `size` tokens, by characters: cut evenly, counted again, and a piece
 * still too long cut again. Without this such a word became one chunk far over the model's
 * limit, and the encoder silently read only its beginning.
 */
async function cutLongWords(words: Word[], size: number, count: TokenCounter): Promise<Word[]> {
  let current = words;
  for (let round = 0; round < MAX_CUT_ROUNDS && current.some((word) => word.tokens > size && word.text.length > 1); round++) {
    const replaced = new Map<Word, Word[]>();
    for (const word of current) {
      if (word.tokens <= size || word.text.length <= 1) continue;
      // A margin, since tokens are not spread evenly over the characters.
      replaced.set(word, cutWord(word, Math.ceil((word.tokens * 1.25) / size)));
    }
    const fresh = [...replaced.values()].flat();
    const counts = await count(fresh.map((piece) => piece.text));
    fresh.forEach((piece, i) => {
      piece.tokens = counts[i] ?? 1;
    });
    current = current.flatMap((word) => replaced.get(word) ?? [word]);
  }
  return current;
}

/** Splits sentences longer than `size` tokens into runs of whole words, words longer than a chunk cut (batched counts). */
async function splitLongUnits(units: Unit[], pages: Map<number, string>, size: number, count: TokenCounter): Promise<Unit[]> {
  const long = units.filter((unit) => unit.tokens > size);
  if (long.length === 0) return units;
  const words: Word[][] = long.map((unit, owner) => {
    const text = pages.get(unit.page) ?? '';
    return [...text.slice(unit.start, unit.end).matchAll(/\S+/g)].map((m) => ({ owner, start: unit.start + m.index, end: unit.start + m.index + m[0].length, text: m[0], tokens: 0 }));
  });
  const all = words.flat();
  const counts = await count(all.map((word) => word.text));
  all.forEach((word, i) => {
    word.tokens = counts[i] ?? 1;
  });
  const cut = await cutLongWords(all, size, count);
  // Each word (or piece) back to its unit, in order.
  const pieces = new Map<Unit, Unit[]>();
  let at = 0;
  for (const [owner, unit] of long.entries()) {
    const out: Unit[] = [];
    let current: Unit | null = null;
    while (at < cut.length && cut[at]?.owner === owner) {
      const word = cut[at] as Word;
      at += 1;
      if (current !== null && current.tokens + word.tokens <= size && word.end - current.start <= MAX_UNIT_CHARS) {
        current.end = word.end;
        current.tokens += word.tokens;
        continue;
      }
      current = { page: unit.page, start: word.start, end: word.end, opensParagraph: out.length === 0 && unit.opensParagraph, tokens: word.tokens };
      out.push(current);
    }
    pieces.set(unit, out);
  }
  return units.flatMap((unit) => pieces.get(unit) ?? [unit]);
}

/** Tokens from each paragraph-opening unit to the end of its paragraph. */
function paragraphTokens(units: readonly Unit[]): number[] {
  const rest = new Array<number>(units.length).fill(0);
  let sum = 0;
  for (let i = units.length - 1; i >= 0; i -= 1) {
    sum += units[i]?.tokens ?? 0;
    rest[i] = sum;
    if (units[i]?.opensParagraph === true) sum = 0;
  }
  return rest;
}

/**
 * Packs one page's units into [from, to) ranges. Each chunk after the first starts with up to
 * `overlap` tokens of the one before, and always holds at least one unit no chunk had yet: an
 * overlap that leaves no room for the next unit is shortened (a chunk of nothing but the previous
 * chunk's tail would be a duplicate vector crowding the top-k).
 */
function pack(units: readonly Unit[], settings: ChunkSettings): [number, number][] {
  const ranges: [number, number][] = [];
  const toParagraphEnd = paragraphTokens(units);
  let i = 0;
  /** The first unit no chunk holds yet. */
  let fresh = 0;
  while (i < units.length) {
    let j = i;
    let tokens = 0;
    while (j < units.length) {
      const unit = units[j] as Unit;
      if (j > fresh && tokens + unit.tokens > settings.size) break;
      if (j > fresh && unit.end - (units[i] as Unit).start > MAX_CHUNK_CHARS) break;
      // A new paragraph that will not fit whole starts the next chunk, if this one is half full.
      if (j > fresh && unit.opensParagraph && tokens >= settings.size / 2 && tokens + (toParagraphEnd[j] ?? 0) > settings.size) break;
      tokens += unit.tokens;
      j += 1;
    }
    ranges.push([i, j]);
    if (j >= units.length) break;
    fresh = j;
    let k = j;
    let overlap = 0;
    const next = units[j]?.tokens ?? 0;
    const nextEnd = units[j]?.end ?? 0;
    // The overlap also leaves the first fresh unit within MAX_CHUNK_CHARS of the chunk's start.
    while (k - 1 > i && overlap + (units[k - 1]?.tokens ?? 0) <= settings.overlap && overlap + (units[k - 1]?.tokens ?? 0) + next <= settings.size && nextEnd - (units[k - 1]?.start ?? 0) <= MAX_CHUNK_CHARS) {
      overlap += units[k - 1]?.tokens ?? 0;
      k -= 1;
    }
    i = k;
  }
  return ranges;
}

/**
 * The heading a chunk falls under: the last one that starts before the end of the chunk's first
 * unit. A chunk opening with `# Daily checks` falls under "Daily checks", whose offset (its text,
 * after the `#` marks) lies a little after the chunk's start.
 */
class HeadingCursor {
  readonly #headings: readonly { offset: number; text: string }[];
  #next = 0;
  #heading: string | null;

  constructor(page: ParsedPage, carried: string | null) {
    // Sorted once (stable: of two at one offset the later still wins), then walked forward: a
    // scan of all headings per chunk was chunks × headings on a long Markdown page.
    this.#headings = [...(page.headings ?? [])].sort((a, b) => a.offset - b.offset);
    this.#heading = carried;
  }

  /** The heading at `offset`; offsets must not decrease between calls. */
  at(offset: number): string | null {
    while (this.#next < this.#headings.length && (this.#headings[this.#next]?.offset ?? Infinity) <= offset) {
      this.#heading = this.#headings[this.#next]?.text ?? null;
      this.#next += 1;
    }
    return this.#heading;
  }
}

/** Chunks a whole document (all pages) with two tokenize calls at most. */
export async function chunkPages(pages: readonly ParsedPage[], settings: ChunkSettings, count: TokenCounter): Promise<TextChunk[]> {
  const raw: Unit[] = [];
  for (const page of pages) sentenceUnits(page, raw);
  const texts = new Map(pages.map((page) => [page.page, page.text]));
  const counts = await count(raw.map((unit) => (texts.get(unit.page) ?? '').slice(unit.start, unit.end)));
  // Counted in place: a copy of every unit with its count was 200,000 more objects for 8,000 pages.
  raw.forEach((unit, i) => {
    unit.tokens = counts[i] ?? 0;
  });
  const units = await splitLongUnits(raw, texts, settings.size, count);
  // Grouped in one pass: filtering all units for each page was pages × units (8,000 pages: minutes).
  const byPage = new Map<number, Unit[]>();
  for (const unit of units) {
    const list = byPage.get(unit.page);
    if (list === undefined) byPage.set(unit.page, [unit]);
    else list.push(unit);
  }
  const chunks: TextChunk[] = [];
  // A heading carries over to the next pages until another one appears.
  let carriedHeading: string | null = null;
  for (const page of pages) {
    const pageUnits = byPage.get(page.page) ?? [];
    const headings = new HeadingCursor(page, carriedHeading);
    for (const [from, to] of pack(pageUnits, settings)) {
      const first = pageUnits[from] as Unit;
      const last = pageUnits[to - 1] as Unit;
      let tokens = 0;
      for (let at = from; at < to; at += 1) tokens += pageUnits[at]?.tokens ?? 0;
      chunks.push({
        index: chunks.length,
        page: page.page,
        start: first.start,
        end: last.end,
        text: page.text.slice(first.start, last.end),
        tokens,
        heading: headings.at(first.end - 1),
      });
    }
    carriedHeading = headings.at(page.text.length);
  }
  return chunks;
}
