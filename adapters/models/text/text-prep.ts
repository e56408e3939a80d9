import { encodeBatch, type EncodingCache } from '../../tokenizers/batch-encode.js';
import type { TextTokenizer } from '../../tokenizers/text-tokenizer.js';
import { requireTokenizer, type PrepContext, type PreparedText, type PrepareRequest } from '../family.js';

/**
 * The preparation shared by plain text families (dense, cross-encoder, SPLADE): optional
 * lower-casing, tokenization with truncation to the effective max length, pair templates.
 */

const caches = new WeakMap<TextTokenizer, EncodingCache>();

export function attachCache(tokenizer: TextTokenizer, cache: EncodingCache): void {
  caches.set(tokenizer, cache);
}

function leadingSpecials(tokenizer: TextTokenizer): number {
  let n = 0;
  for (const piece of tokenizer.info.template.single) {
    if (piece.kind !== 'special') break;
    n += piece.ids.length;
  }
  return n;
}

export function prepareTexts(context: PrepContext, request: PrepareRequest): PreparedText[] {
  const { profile } = context;
  const tokenizer = requireTokenizer(context.tokenizer, profile.id);
  const lowercase = profile.tokenizer?.lowercase === true;
  const inputs = request.items.map((item) => {
    const text = lowercase ? item.text.toLowerCase() : item.text;
    if (item.pair === undefined) return { text };
    return { text, pair: lowercase ? item.pair.toLowerCase() : item.pair };
  });
  const cache = caches.get(tokenizer);
  const encoded = encodeBatch(
    tokenizer,
    inputs,
    { maxLength: request.maxLength, ...(request.exactLength === true ? { exactLength: true } : {}) },
    cache,
  );
  const promptCounts = new Map<string, number>();
  const lead = leadingSpecials(tokenizer);
  return encoded.map((enc, i): PreparedText => {
    const item = request.items[i];
    const prompt = item?.prompt ?? '';
    let promptTokens = 0;
    if (prompt !== '') {
      let count = promptCounts.get(prompt);
      if (count === undefined) {
        count = lead + tokenizer.segmentIds(lowercase ? prompt.toLowerCase() : prompt).length;
        promptCounts.set(prompt, count);
      }
      promptTokens = count;
    }
    const hasTypes = enc.typeIds.some((t) => t !== 0);
    return {
      kind: 'text',
      ids: enc.ids,
      typeIds: hasTypes ? enc.typeIds : null,
      attention: null,
      truncated: enc.truncated,
      length: enc.length,
      promptTokens,
      role: item?.role ?? 'document',
    };
  });
}
