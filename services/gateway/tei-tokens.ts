import { locateTokens, type SurfaceRule } from '../../adapters/tokenizers/offsets.js';
import type { TokenizedItem } from '../../adapters/protocol/results.js';

/**
 * TEI's token shape out of Shoal's tokenize result, which has ids and token strings but neither
 * special-token flags nor offsets:
 * - special: the template's special tokens (model-facts.ts, the tokenization of "") split into the
 *   ones before and the ones after the text, matched at the ends of each tokenization;
 * - start/stop: each other token located in the text as a fast tokenizer's offset mapping would
 *   (adapters/tokenizers/offsets.ts), the tokenizer kind read off the token strings themselves,
 *   then turned into UTF-8 byte offsets as TEI's are (`text` is the input's slice between them).
 * Special tokens have `start`/`stop` null and their token string as `text`, as in TEI.
 * The work is linear in the text; the route bounds the characters of a request.
 */

export interface TeiToken {
  id: number;
  text: string;
  special: boolean;
  start: number | null;
  stop: number | null;
}

/**
 * Which of `ids` are the template's: the split of `template` into a prefix and a suffix that both
 * match `ids` at its ends, the longest prefix first (`[CLS] … [SEP]`: prefix 1, suffix 1).
 */
export function specialMask(ids: readonly number[], template: readonly number[]): boolean[] {
  const mask = new Array<boolean>(ids.length).fill(false);
  for (let prefix = template.length; prefix >= 0; prefix--) {
    const suffix = template.length - prefix;
    if (prefix + suffix > ids.length) continue;
    let matches = true;
    for (let k = 0; k < prefix && matches; k++) matches = ids[k] === template[k];
    for (let k = 0; k < suffix && matches; k++) matches = ids[ids.length - suffix + k] === template[prefix + k];
    if (!matches) continue;
    for (let k = 0; k < prefix; k++) mask[k] = true;
    for (let k = 0; k < suffix; k++) mask[ids.length - suffix + k] = true;
    return mask;
  }
  return mask;
}

/** The tokenizer kind the token strings show: `▁` (SentencePiece), `Ġ`/`Ċ` (byte-level BPE), `</w>`, else WordPiece's `##`. */
export function surfaceRuleOf(tokens: readonly string[]): SurfaceRule {
  if (tokens.some((token) => token.includes('\u2581'))) return { kind: 'metaspace', replacement: '\u2581' };
  if (tokens.some((token) => token.startsWith('\u0120') || token.includes('\u010a'))) return { kind: 'bytelevel' };
  if (tokens.some((token) => token.endsWith('</w>'))) return { kind: 'plain', endOfWordSuffix: '</w>' };
  return { kind: 'wordpiece', continuingPrefix: '##' };
}

/** UTF-8 byte offset of every UTF-16 index of `text` (length + 1 entries). */
function byteOffsets(text: string): Int32Array {
  const offsets = new Int32Array(text.length + 1);
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    offsets[i] = bytes;
    const unit = text.charCodeAt(i);
    if (unit < 0x80) bytes += 1;
    else if (unit < 0x800) bytes += 2;
    else if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        // The pair is one 4-byte character: its low half starts where the character does.
        bytes += 4;
        offsets[i + 1] = offsets[i] ?? 0;
        i++;
        continue;
      }
      bytes += 3;
    } else bytes += 3;
  }
  offsets[text.length] = bytes;
  return offsets;
}

/** One tokenized text as TEI's list of tokens; `withSpecial: false` drops the template's tokens (TEI's `add_special_tokens: false`). */
export function teiTokens(text: string, item: TokenizedItem, templateIds: readonly number[], withSpecial: boolean): TeiToken[] {
  const special = specialMask(item.ids, templateIds);
  const plain = item.tokens.filter((_token, k) => special[k] !== true);
  const spans = locateTokens(text, plain, surfaceRuleOf(plain), null);
  const bytes = byteOffsets(text);
  const out: TeiToken[] = [];
  let next = 0;
  item.ids.forEach((id, k) => {
    const token = item.tokens[k] ?? '';
    if (special[k] === true) {
      if (withSpecial) out.push({ id, text: token, special: true, start: null, stop: null });
      return;
    }
    const [start, stop] = spans[next++] ?? [0, 0];
    out.push({ id, text: text.slice(start, stop), special: false, start: bytes[start] ?? 0, stop: bytes[stop] ?? 0 });
  });
  return out;
}
