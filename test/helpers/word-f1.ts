/**
 * Word-level F1 of an OCR reading against a reference text (the PDF's own text layer), as a bag
 * of words: reading order and line breaks do not matter, every word counts once per occurrence.
 * Words are the runs of letters and digits after NFKC (ligatures such as "ﬁ") and case folding,
 * so punctuation never makes or breaks a word: "No.07-1315" and "No. 07–1315" are the same three
 * words, a comma read without its following space ("General,Los") costs nothing, and a recognizer
 * whose charset lacks "–" or "“" is not penalized for it. Both engines are measured the same way.
 */

export function ocrWords(text: string): string[] {
  return text.normalize('NFKC').toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

export interface WordF1 {
  f1: number;
  precision: number;
  recall: number;
  /** Words the reading and the reference have in common (multiset intersection). */
  common: number;
  readWords: number;
  referenceWords: number;
}

export function wordF1(read: string, reference: string): WordF1 {
  const readWords = ocrWords(read);
  const referenceWords = ocrWords(reference);
  const counts = new Map<string, number>();
  for (const word of referenceWords) counts.set(word, (counts.get(word) ?? 0) + 1);
  let common = 0;
  for (const word of readWords) {
    const left = counts.get(word) ?? 0;
    if (left > 0) {
      common++;
      counts.set(word, left - 1);
    }
  }
  const precision = readWords.length === 0 ? 0 : common / readWords.length;
  const recall = referenceWords.length === 0 ? 0 : common / referenceWords.length;
  const f1 = precision + recall === 0 ? 0 : (2 * precision * recall) / (precision + recall);
  return { f1, precision, recall, common, readWords: readWords.length, referenceWords: referenceWords.length };
}
