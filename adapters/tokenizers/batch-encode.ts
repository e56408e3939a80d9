import type { Encoded, TextTokenizer } from './text-tokenizer.js';

/**
 * Batch encoding: identical inputs inside a batch are tokenized once, and short inputs seen
 * recently (search queries repeat) come from a bounded cache instead of the tokenizer.
 */

export interface BatchInput {
  text: string;
  pair?: string;
}

export interface BatchEncodeOptions {
  maxLength: number;
  exactLength?: boolean;
}

/** Inputs up to this many characters are cached; longer ones are rarely repeated. */
const CACHEABLE_CHARS = 512;

export class EncodingCache {
  readonly #entries = new Map<string, Encoded>();
  readonly #capacity: number;

  constructor(capacity = 4096) {
    this.#capacity = capacity;
  }

  get(key: string): Encoded | undefined {
    const hit = this.#entries.get(key);
    if (hit !== undefined) {
      // Re-insert to mark as most recently used.
      this.#entries.delete(key);
      this.#entries.set(key, hit);
    }
    return hit;
  }

  set(key: string, value: Encoded): void {
    if (this.#entries.size >= this.#capacity) {
      const oldest = this.#entries.keys().next();
      if (oldest.done !== true) this.#entries.delete(oldest.value);
    }
    this.#entries.set(key, value);
  }

  get size(): number {
    return this.#entries.size;
  }
}

function cacheKey(input: BatchInput, options: BatchEncodeOptions): string {
  return `${options.maxLength}\u0000${options.exactLength === true ? 1 : 0}\u0000${input.text}\u0000${input.pair ?? '\u0001'}`;
}

export function encodeBatch(
  tokenizer: TextTokenizer,
  inputs: readonly BatchInput[],
  options: BatchEncodeOptions,
  cache?: EncodingCache,
): Encoded[] {
  const seen = new Map<string, Encoded>();
  return inputs.map((input) => {
    const key = cacheKey(input, options);
    const known = seen.get(key) ?? cache?.get(key);
    if (known !== undefined) {
      seen.set(key, known);
      return known;
    }
    const encodeOptions = input.pair === undefined ? { ...options } : { ...options, pair: input.pair };
    const encoded = tokenizer.encode(input.text, encodeOptions);
    seen.set(key, encoded);
    if (cache !== undefined && input.text.length + (input.pair?.length ?? 0) <= CACHEABLE_CHARS) cache.set(key, encoded);
    return encoded;
  });
}
