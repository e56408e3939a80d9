/**
 * Truncation of bare (special-token-free) segments to a token budget, following the Rust
 * `tokenizers` rules that transformers and sentence-transformers use.
 */

export type TruncationSide = 'left' | 'right';

export function cut<T>(tokens: readonly T[], keep: number, side: TruncationSide): T[] {
  if (tokens.length <= keep) return [...tokens];
  return side === 'right' ? tokens.slice(0, keep) : tokens.slice(tokens.length - keep);
}

/**
 * How many tokens of each segment of a pair survive `longest_first` truncation to `budget`:
 * a segment no longer than half the budget keeps everything and the other gets the rest;
 * when both are longer, the originally shorter one (the first on a tie) gets floor(budget / 2)
 * and the longer one the remainder.
 */
export function longestFirstLengths(lengthA: number, lengthB: number, budget: number): [number, number] {
  if (lengthA + lengthB <= budget) return [lengthA, lengthB];
  const swapped = lengthA > lengthB;
  const shorter = swapped ? lengthB : lengthA;
  const keepShorter = Math.min(shorter, Math.floor(budget / 2));
  const keepLonger = budget - keepShorter;
  return swapped ? [keepLonger, keepShorter] : [keepShorter, keepLonger];
}
