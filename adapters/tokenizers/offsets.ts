/**
 * Character offsets of tokens in the ORIGINAL text, as a fast tokenizer's offset mapping reports
 * them (an accent removed by normalization still maps to its original character). The JS tokenizer
 * library has no offsets API, so each token's surface form is located, in order, in a folded copy
 * of the text (NFKD, marks removed, lower case) that remembers where each folded unit came from.
 */

export type SurfaceRule =
  | { kind: 'wordpiece'; continuingPrefix: string }
  | { kind: 'metaspace'; replacement: string }
  | { kind: 'bytelevel' }
  | { kind: 'plain'; endOfWordSuffix: string | null };

export type Span = [start: number, end: number];

interface FoldedText {
  folded: string;
  /** For each UTF-16 unit of `folded`: the [start, end) of the original character it came from. */
  origin: Span[];
}

function foldChar(char: string): string {
  return char.normalize('NFKD').replace(/\p{M}/gu, '').toLowerCase();
}

function foldText(text: string): FoldedText {
  let folded = '';
  const origin: Span[] = [];
  let index = 0;
  for (const char of text) {
    const piece = foldChar(char);
    const span: Span = [index, index + char.length];
    // A combining mark that folds away belongs to the character before it (as in a fast
    // tokenizer's alignments): "cafe\u0301" → "cafe" still covers the accent.
    const previous = origin[origin.length - 1];
    if (piece.length === 0 && previous !== undefined && previous[1] === index) previous[1] = index + char.length;
    for (let k = 0; k < piece.length; k++) origin.push(span);
    folded += piece;
    index += char.length;
  }
  return { folded, origin };
}

let byteDecoder: Map<string, number> | null = null;

/** Inverse of the GPT-2 byte-to-unicode table used by byte-level BPE vocabularies. */
function byteLevelDecoder(): Map<string, number> {
  if (byteDecoder !== null) return byteDecoder;
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const map = new Map<string, number>();
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    if (printable.includes(b)) map.set(String.fromCharCode(b), b);
    else map.set(String.fromCharCode(256 + extra++), b);
  }
  byteDecoder = map;
  return map;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The text a token stands for, or null when it cannot be known ([UNK], a partial UTF-8 byte run). */
export function tokenSurface(token: string, rule: SurfaceRule): string | null {
  switch (rule.kind) {
    case 'wordpiece':
      return token.length > rule.continuingPrefix.length && token.startsWith(rule.continuingPrefix)
        ? token.slice(rule.continuingPrefix.length)
        : token;
    case 'metaspace':
      return token.split(rule.replacement).join(' ');
    case 'bytelevel': {
      const decoder = byteLevelDecoder();
      const bytes: number[] = [];
      for (const char of token) {
        const byte = decoder.get(char);
        if (byte === undefined) return token;
        bytes.push(byte);
      }
      try {
        return utf8.decode(new Uint8Array(bytes));
      } catch {
        return null;
      }
    }
    case 'plain':
      return rule.endOfWordSuffix !== null && token.endsWith(rule.endOfWordSuffix)
        ? token.slice(0, token.length - rule.endOfWordSuffix.length)
        : token;
  }
}

/**
 * Offsets for `tokens` (without special tokens) of `text`. Tokens whose surface is unknown get the
 * span between the previous located token and the next one (whitespace trimmed), which is what a
 * fast tokenizer reports for a whole-word [UNK].
 */
export function locateTokens(text: string, tokens: readonly string[], rule: SurfaceRule, unkToken: string | null): Span[] {
  const { folded, origin } = foldText(text);
  const spans: (Span | null)[] = new Array<Span | null>(tokens.length).fill(null);
  let cursor = 0;
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] ?? '';
    const surface = token === unkToken ? null : tokenSurface(token, rule);
    const needle = surface === null ? '' : foldChar(surface).trim();
    if (needle.length === 0) continue;
    const found = folded.indexOf(needle, cursor);
    if (found < 0) continue;
    const first = origin[found];
    const last = origin[found + needle.length - 1];
    if (first === undefined || last === undefined) continue;
    spans[i] = [first[0], last[1]];
    cursor = found + needle.length;
  }
  return fillUnknownSpans(text, spans);
}

function isSpace(char: string | undefined): boolean {
  return char !== undefined && /\s/u.test(char);
}

function fillUnknownSpans(text: string, spans: (Span | null)[]): Span[] {
  const out: Span[] = [];
  let previousEnd = 0;
  for (let i = 0; i < spans.length; i++) {
    const span = spans[i];
    if (span !== null && span !== undefined) {
      out.push(span);
      previousEnd = span[1];
      continue;
    }
    let nextStart = text.length;
    for (let j = i + 1; j < spans.length; j++) {
      const next = spans[j];
      if (next !== null && next !== undefined) {
        nextStart = next[0];
        break;
      }
    }
    let start = previousEnd;
    while (start < nextStart && isSpace(text[start])) start++;
    // A whole-word unknown ends at the next whitespace, not at the next token.
    let end = start;
    while (end < nextStart && !isSpace(text[end])) end++;
    out.push([start, end]);
    previousEnd = end;
  }
  return out;
}
