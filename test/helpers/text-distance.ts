/**
 * Character error rate for OCR tests: Levenshtein distance between the OCR text and a reference,
 * over Unicode code points, divided by the reference length. Both texts are NFKC-normalized (PDF
 * text layers hold ligatures such as "ﬁ") and whitespace runs become one space, so line breaks
 * and column padding do not count as errors.
 */

export function normalizeForCer(text: string): string {
  return text.normalize('NFKC').replace(/\s+/g, ' ').trim();
}

export function levenshtein(a: string, b: string): number {
  const left = [...a];
  const right = [...b];
  let previous = Int32Array.from({ length: right.length + 1 }, (_, j) => j);
  let current = new Int32Array(right.length + 1);
  for (let i = 1; i <= left.length; i++) {
    current[0] = i;
    const char = left[i - 1];
    for (let j = 1; j <= right.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (char === right[j - 1] ? 0 : 1);
      current[j] = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution);
    }
    [previous, current] = [current, previous];
  }
  return previous[right.length] ?? 0;
}

export interface CerResult {
  cer: number;
  distance: number;
  referenceLength: number;
}

export function characterErrorRate(hypothesis: string, reference: string): CerResult {
  const ref = normalizeForCer(reference);
  const hyp = normalizeForCer(hypothesis);
  const distance = levenshtein(hyp, ref);
  return { cer: ref.length === 0 ? (hyp.length === 0 ? 0 : 1) : distance / [...ref].length, distance, referenceLength: [...ref].length };
}
