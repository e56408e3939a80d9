/**
 * Overlapping windows over a token sequence longer than one model pass (pure). Each token is read
 * in every window that contains it but takes its prediction from exactly one: where two windows
 * overlap, the first half of the overlap belongs to the earlier window and the second half to the
 * later one, so every kept prediction has at least half the overlap of context on both sides.
 * Predictions are stitched per token BEFORE aggregation, so an entity that crosses a window
 * boundary comes out once, whole, instead of twice or cut in two.
 */

export interface TokenWindow {
  /** [start, end) of the tokens the model reads in this window. */
  start: number;
  end: number;
  /** [keepStart, keepEnd) of the tokens whose prediction comes from this window. */
  keepStart: number;
  keepEnd: number;
}

/** Consecutive windows share a quarter of their tokens unless the profile says otherwise. */
export function defaultOverlap(windowTokens: number): number {
  return Math.floor(windowTokens / 4);
}

/**
 * Windows of at most `windowTokens` over `length` tokens, consecutive ones sharing `overlap`
 * tokens (clamped so each window advances by at least one). The last window is aligned to the end
 * of the sequence so it is full, and its overlap with the one before may be larger. The keep
 * ranges partition [0, length).
 */
export function planWindows(length: number, windowTokens: number, overlap: number): TokenWindow[] {
  const size = Math.max(1, Math.floor(windowTokens));
  if (length <= size) return [{ start: 0, end: length, keepStart: 0, keepEnd: length }];
  const shared = Math.min(Math.max(0, Math.floor(overlap)), size - 1);
  const step = size - shared;
  const starts: number[] = [];
  for (let start = 0; start + size < length; start += step) starts.push(start);
  starts.push(length - size);
  const windows: TokenWindow[] = starts.map((start) => ({ start, end: start + size, keepStart: start, keepEnd: start + size }));
  for (let k = 0; k + 1 < windows.length; k++) {
    const current = windows[k];
    const next = windows[k + 1];
    if (current === undefined || next === undefined) continue;
    // Overlap is [next.start, current.end); split it in the middle.
    const middle = Math.floor((next.start + current.end) / 2);
    current.keepEnd = middle;
    next.keepStart = middle;
  }
  return windows;
}
