import { z } from 'zod';
import type { TokenizerFiles } from './tokenizer-files.js';

/**
 * A fast, exact path for the most common tokenizer shape, BERT WordPiece (BertNormalizer +
 * BertPreTokenizer + WordPiece), giving the ids @huggingface/tokenizers gives for a text without
 * special tokens. The library runs a regex per character in its normalizer and rebuilds every
 * WordPiece candidate from a code-point array; here the normalizer is a few whole-string native
 * operations (none at all for plain ASCII but `toLowerCase`), the words come from one scan, and a
 * word's ids are cached because words repeat.
 *
 * Every step copies the library's semantics (version 0.2.0, dist/tokenizers.mjs), including its
 * quirks: clean_text removes Cc/Cf/Co/Cs (but \t \n \r) and U+FFFD, so \v and \f vanish instead of
 * becoming spaces; CJK spacing looks at UTF-16 units, so only BMP ideographs get spaces;
 * lowercase is `toLowerCase` of the whole text (Greek final sigma, 'İ' → 'i̇'); accents are
 * stripped as NFD then removal of \p{Mn} only; words are maximal runs of code points that are
 * neither JS `\s` nor punctuation (\p{P} or ASCII punctuation), each punctuation code point is a
 * word of its own; max_input_chars_per_word counts code points.
 *
 * Added tokens are not split out here: `ids()` returns null (the caller uses the library) when
 * the text contains an added token's content, or normalizes to exactly one. A tokenizer whose
 * shape differs in any option gets no fast path at all.
 */

/** Words cached per tokenizer; the cache is cleared when full, which is cheap and rare. */
const WORD_CACHE_LIMIT = 50_000;

const Normalizer = z.strictObject({
  type: z.literal('BertNormalizer'),
  clean_text: z.boolean(),
  handle_chinese_chars: z.boolean(),
  strip_accents: z.boolean().nullable(),
  lowercase: z.boolean(),
});

const PreTokenizer = z.strictObject({ type: z.literal('BertPreTokenizer') });

/** The vocab's entries are checked by hand while the map is built (30k entries through zod is slow). */
const Model = z.strictObject({
  type: z.literal('WordPiece'),
  unk_token: z.string(),
  continuing_subword_prefix: z.string(),
  max_input_chars_per_word: z.number().int().nonnegative().nullable().optional(),
  vocab: z.custom<Record<string, unknown>>((value) => typeof value === 'object' && value !== null && !Array.isArray(value)),
});

const AddedToken = z.looseObject({
  id: z.number().int(),
  content: z.string(),
  special: z.boolean().optional(),
  normalized: z.boolean().optional(),
});

/** Character classes of the library's BertPreTokenizer regex. */
const WORD = 1;
const SPACE = 2;
const PUNCT = 3;
const SPACE_RE = /^\s$/u;
const PUNCT_RE = /^[\p{P}\u0021-\u002F\u003A-\u0040\u005B-\u0060\u007B-\u007E]$/u;

function classOf(char: string): number {
  if (SPACE_RE.test(char)) return SPACE;
  return PUNCT_RE.test(char) ? PUNCT : WORD;
}

/** Classes of BMP code units (0 = not looked up yet), filled on demand, shared by all tokenizers. */
const bmpClasses = new Uint8Array(0x10000);
const astralClasses = new Map<number, number>();

function bmpClass(unit: number): number {
  let cls = bmpClasses[unit] ?? 0;
  if (cls === 0) {
    // A lone surrogate tested alone is neither \s nor \p{P} under /u, as in the library's scan.
    cls = classOf(String.fromCharCode(unit));
    bmpClasses[unit] = cls;
  }
  return cls;
}

function astralClass(codePoint: number): number {
  let cls = astralClasses.get(codePoint);
  if (cls === undefined) {
    cls = classOf(String.fromCodePoint(codePoint));
    astralClasses.set(codePoint, cls);
  }
  return cls;
}

/** Text that is only printable ASCII, \t, \n and \r normalizes to itself (lowercased). */
const NOT_PLAIN_ASCII = /[^\t\n\r\x20-\x7E]/;
/** clean_text: the library drops U+0000, U+FFFD and every Cc/Cf/Co/Cs code point but \t \n \r. */
const CLEAN_REMOVE = /[\0\uFFFD]|(?![\t\n\r])[\p{Cc}\p{Cf}\p{Co}\p{Cs}]/gu;
/** clean_text then maps JS `\s` (tested per BMP character, without /u) to a space. */
const CLEAN_SPACE = /\s/g;
/** handle_chinese_chars tests UTF-16 units, so only these BMP ranges ever match. */
const CJK = /[\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF]/g;
const NONSPACING_MARK = /\p{Mn}/gu;

function isHigh(unit: number): boolean {
  return unit >= 0xd800 && unit <= 0xdbff;
}

function isLow(unit: number): boolean {
  return unit >= 0xdc00 && unit <= 0xdfff;
}

function codePointCount(word: string): number {
  let count = 0;
  for (let i = 0; i < word.length; i++) {
    if (isHigh(word.charCodeAt(i)) && isLow(word.charCodeAt(i + 1))) i++;
    count++;
  }
  return count;
}

interface FastOptions {
  cleanText: boolean;
  chineseChars: boolean;
  lowercase: boolean;
  stripAccents: boolean;
  prefix: string;
  maxChars: number;
  unkId: number;
}

export class WordPieceFast {
  readonly #vocab: ReadonlyMap<string, number>;
  readonly #options: FastOptions;
  /** Added tokens' contents: a text containing one is left to the library. */
  readonly #added: readonly string[];
  readonly #addedSet: ReadonlySet<string>;
  readonly #maxAddedLength: number;
  /** No vocab entry is longer (UTF-16 units), so longer candidates are skipped unchecked. */
  readonly #maxKeyLength: number;
  readonly #cache = new Map<string, readonly number[]>();

  private constructor(vocab: ReadonlyMap<string, number>, options: FastOptions, added: readonly string[]) {
    this.#vocab = vocab;
    this.#options = options;
    this.#added = added;
    this.#addedSet = new Set(added);
    this.#maxAddedLength = added.reduce((max, content) => Math.max(max, content.length), 0);
    let maxKey = 0;
    for (const key of vocab.keys()) if (key.length > maxKey) maxKey = key.length;
    this.#maxKeyLength = maxKey;
  }

  /**
   * The fast path for a BERT WordPiece tokenizer, or null for any other shape. `libraryVocab` is
   * the library's own token → id map (`Tokenizer.model.tokens_to_ids`, vocab plus added tokens):
   * sharing it saves building a second 30k-entry map; without it the same map is built here.
   */
  static fromFiles(files: TokenizerFiles, libraryVocab?: ReadonlyMap<string, number>): WordPieceFast | null {
    const raw = files.raw;
    const normalizer = Normalizer.safeParse(raw['normalizer']);
    const preTokenizer = PreTokenizer.safeParse(raw['pre_tokenizer']);
    const model = Model.safeParse(raw['model']);
    const added = z.array(AddedToken).safeParse(raw['added_tokens'] ?? []);
    if (!normalizer.success || !preTokenizer.success || !model.success || !added.success) return null;
    if (!postProcessorKeepsTokens(raw['post_processor'])) return null;
    // The library reads these from tokenizer_config.json and changes the text before normalizing.
    if (files.rawConfig['remove_space'] === true || Boolean(files.rawConfig['do_lowercase_and_remove_accent'])) return null;
    // An added token the library normalizes before matching would need that matching here.
    if (added.data.some((token) => token.normalized ?? !(token.special ?? false))) return null;

    const vocab = libraryVocab ?? vocabMap(model.data.vocab, added.data);
    if (vocab === null) return null;
    const unkId = vocab.get(model.data.unk_token);
    if (unkId === undefined) return null;

    const { lowercase, strip_accents: strip } = normalizer.data;
    return new WordPieceFast(
      vocab,
      {
        cleanText: normalizer.data.clean_text,
        chineseChars: normalizer.data.handle_chinese_chars,
        lowercase,
        stripAccents: lowercase ? strip !== false : strip === true,
        prefix: model.data.continuing_subword_prefix,
        maxChars: model.data.max_input_chars_per_word ?? 100,
        unkId,
      },
      added.data.map((token) => token.content),
    );
  }

  /** Ids of `text` without special tokens, or null when the library must tokenize it. */
  ids(text: string): number[] | null {
    for (const content of this.#added) if (text.includes(content)) return null;
    const normalized = this.#normalize(text);
    if (normalized.length <= this.#maxAddedLength && this.#addedSet.has(normalized)) return null;
    const out: number[] = [];
    const n = normalized.length;
    let start = -1;
    for (let i = 0; i < n; i++) {
      const unit = normalized.charCodeAt(i);
      let cls: number;
      let width = 1;
      if (isHigh(unit) && i + 1 < n && isLow(normalized.charCodeAt(i + 1))) {
        cls = astralClass(normalized.codePointAt(i) ?? unit);
        width = 2;
      } else {
        cls = bmpClass(unit);
      }
      if (cls === WORD) {
        if (start < 0) start = i;
      } else {
        if (start >= 0) {
          this.#pushWord(normalized.slice(start, i), out);
          start = -1;
        }
        if (cls === PUNCT) this.#pushWord(normalized.slice(i, i + width), out);
      }
      i += width - 1;
    }
    if (start >= 0) this.#pushWord(normalized.slice(start), out);
    return out;
  }

  /** The library's BertNormalizer, step for step, as whole-string native operations. */
  #normalize(text: string): string {
    const options = this.#options;
    if (!NOT_PLAIN_ASCII.test(text)) return options.lowercase ? text.toLowerCase() : text;
    let s = text;
    if (options.cleanText) s = s.replace(CLEAN_REMOVE, '').replace(CLEAN_SPACE, ' ');
    if (options.chineseChars) s = s.replace(CJK, ' $& ');
    if (options.lowercase) s = s.toLowerCase();
    if (options.stripAccents) s = s.normalize('NFD').replace(NONSPACING_MARK, '');
    return s;
  }

  #pushWord(word: string, out: number[]): void {
    let ids = this.#cache.get(word);
    if (ids === undefined) {
      ids = this.#wordPiece(word);
      if (this.#cache.size >= WORD_CACHE_LIMIT) this.#cache.clear();
      this.#cache.set(word, ids);
    }
    for (const id of ids) out.push(id);
  }

  /** Greedy longest-match-first over code points, as the library's WordPiece model. */
  #wordPiece(word: string): readonly number[] {
    const { prefix, maxChars, unkId } = this.#options;
    if (codePointCount(word) > maxChars) return [unkId];
    const ids: number[] = [];
    const length = word.length;
    let start = 0;
    while (start < length) {
      const bound = start === 0 ? this.#maxKeyLength : this.#maxKeyLength - prefix.length;
      let end = Math.min(length, start + bound);
      // Never cut a surrogate pair: the library only tries whole code points.
      if (end < length && end > start && isLow(word.charCodeAt(end)) && isHigh(word.charCodeAt(end - 1))) end--;
      let found: number | undefined;
      while (end > start) {
        const piece = word.slice(start, end);
        found = this.#vocab.get(start > 0 ? prefix + piece : piece);
        if (found !== undefined) break;
        end -= end - 2 >= start && isLow(word.charCodeAt(end - 1)) && isHigh(word.charCodeAt(end - 2)) ? 2 : 1;
      }
      if (found === undefined) return [unkId];
      ids.push(found);
      start = end;
    }
    return ids;
  }
}

/** The library's WordPiece map: the vocab in Object.entries order, then the added tokens. */
function vocabMap(entries: Record<string, unknown>, added: readonly { content: string; id: number }[]): Map<string, number> | null {
  const vocab = new Map<string, number>();
  for (const [token, id] of Object.entries(entries)) {
    if (typeof id !== 'number' || !Number.isInteger(id)) return null;
    vocab.set(token, id);
  }
  for (const token of added) vocab.set(token.content, token.id);
  return vocab;
}

/**
 * Whether the post-processor leaves the tokens of a single text as they are when no special
 * tokens are added: none, BertProcessing, or a template whose single form holds sequence A once.
 */
function postProcessorKeepsTokens(value: unknown): boolean {
  if (value === null || value === undefined) return true;
  const parsed = z
    .looseObject({ type: z.string(), single: z.array(z.looseObject({ Sequence: z.looseObject({ id: z.string() }).optional() })).optional() })
    .safeParse(value);
  if (!parsed.success) return false;
  if (parsed.data.type === 'BertProcessing') return true;
  if (parsed.data.type !== 'TemplateProcessing') return false;
  const sequences = (parsed.data.single ?? []).filter((piece) => piece.Sequence !== undefined);
  return sequences.length === 1 && sequences[0]?.Sequence?.id === 'A';
}
