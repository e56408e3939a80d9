import type { Entity } from '../../protocol/results.js';
import type { FloatTensor } from '../../runtime/tensors.js';
import type { GlinerWindow, PreparedGliner } from '../family.js';

/**
 * GLiNER span decoding: sigmoid of each span's logit, spans above the threshold, then greedy flat
 * decoding (highest score first, a span is kept unless it shares a word with a kept one), output
 * by position. Spans are in the item's word indices, so windows of a long text decode as one.
 */

export interface SpanCandidate {
  /** First and last word (inclusive), in the item's words. */
  start: number;
  end: number;
  label: number;
  score: number;
}

function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x));
}

/** Words between the span and the window's cut edges; a text's own start and end are no cut. */
function margin(window: GlinerWindow, totalWords: number, start: number, end: number): number {
  const windowEnd = window.firstWord + window.wordCount;
  const before = window.firstWord > 0 ? start - window.firstWord : Number.POSITIVE_INFINITY;
  const after = windowEnd < totalWords ? windowEnd - 1 - end : Number.POSITIVE_INFINITY;
  return Math.min(before, after);
}

/**
 * Whether window `index` scores the span, when overlapping windows both hold it: the one where the
 * span sits farthest from a cut edge (most context) wins, the earlier one on a tie.
 */
export function ownsSpan(windows: readonly GlinerWindow[], index: number, totalWords: number, start: number, end: number): boolean {
  const own = windows[index];
  if (own === undefined) return false;
  if (windows.length === 1) return true;
  const mine = margin(own, totalWords, start, end);
  for (let j = index - 1; j >= 0; j--) {
    const other = windows[j];
    if (other === undefined || other.firstWord + other.wordCount <= end) break;
    if (margin(other, totalWords, start, end) >= mine) return false;
  }
  for (let j = index + 1; j < windows.length; j++) {
    const other = windows[j];
    if (other === undefined || other.firstWord > start) break;
    if (margin(other, totalWords, start, end) > mine) return false;
  }
  return true;
}

export interface RowLogits {
  /** logits [batch, maxWords, maxWidth, labels]. */
  logits: FloatTensor;
  row: number;
}

/** Appends the spans of one window above `threshold` to `out`, enumerated by (start, width, label). */
export function collectCandidates(
  source: RowLogits,
  item: PreparedGliner,
  windowIndex: number,
  threshold: number,
  out: SpanCandidate[],
): void {
  const window = item.windows[windowIndex];
  if (window === undefined) return;
  const [, maxWords = 0, maxWidth = 0, labels = 0] = source.logits.dims;
  const data = source.logits.data;
  const totalWords = item.words.length;
  for (let s = 0; s < window.wordCount; s++) {
    for (let w = 0; w < maxWidth && s + w < window.wordCount; w++) {
      const base = ((source.row * maxWords + s) * maxWidth + w) * labels;
      const start = window.firstWord + s;
      const end = start + w;
      let owned: boolean | null = null;
      for (let c = 0; c < labels; c++) {
        const score = sigmoid(data[base + c] ?? Number.NEGATIVE_INFINITY);
        if (!(score > threshold)) continue;
        owned ??= ownsSpan(item.windows, windowIndex, totalWords, start, end);
        if (!owned) break;
        out.push({ start, end, label: c, score });
      }
    }
  }
}

/** Greedy flat NER: no two kept spans share a word. Returns the kept spans by start word. */
export function decodeFlat(candidates: readonly SpanCandidate[], totalWords: number): SpanCandidate[] {
  // Equal scores keep GLiNER's enumeration order (start, width, label): a stable sort would.
  const order = [...candidates].sort(
    (a, b) => b.score - a.score || a.start - b.start || a.end - b.end || a.label - b.label,
  );
  const taken = new Uint8Array(totalWords);
  const kept: SpanCandidate[] = [];
  for (const candidate of order) {
    let free = true;
    for (let k = candidate.start; k <= candidate.end; k++) {
      if (taken[k] === 1) {
        free = false;
        break;
      }
    }
    if (!free) continue;
    taken.fill(1, candidate.start, candidate.end + 1);
    kept.push(candidate);
  }
  return kept.sort((a, b) => a.start - b.start);
}

export function toEntities(spans: readonly SpanCandidate[], item: PreparedGliner): Entity[] {
  return spans.map((span) => {
    const start = item.words[span.start]?.[0] ?? 0;
    const end = item.words[span.end]?.[1] ?? start;
    return { text: item.text.slice(start, end), label: item.labels[span.label] ?? '', score: span.score, start, end };
  });
}
