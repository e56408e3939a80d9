/**
 * The progress clock of one batch of a documents worker (document-jobs.ts). A batch holds its
 * jobs while it works (their ack wait extended), so a batch waiting on something that never
 * answers would hold them for ever; the worker hands such a batch's jobs back once its clock shows
 * no progress for the stall limit (SHOAL_DOCUMENTS_STALL_MS).
 *
 * Progress is anything that shows the batch moving: a page parsed (OCR included, page by page), a
 * part of one of its encode jobs finished by the model workers, a stage step done, a commit about
 * to be written, a document ended. The closing index build (`optimize()`, which at a million rows
 * can take many minutes as one statement) is not counted against the batch: the clock stops while
 * it runs.
 */

/** An hour: longer than any step measured between two signs of progress (a dense OCR page takes seconds, a million-row index build is exempt). */
export const DEFAULT_STALL_MS = 3_600_000;

export class BatchProgress {
  readonly #now: () => number;
  #lastAt: number;
  /** Index builds running (each lane of a batch may run one). */
  #indexing = 0;

  constructor(now: () => number = Date.now) {
    this.#now = now;
    this.#lastAt = now();
  }

  touch(): void {
    this.#lastAt = this.#now();
  }

  /** An index build starts (true) or ends (false); its end counts as progress. */
  indexing(running: boolean): void {
    this.#indexing = Math.max(0, this.#indexing + (running ? 1 : -1));
    this.touch();
  }

  /** Milliseconds without progress; 0 while an index build runs. */
  idleMs(): number {
    return this.#indexing > 0 ? 0 : this.#now() - this.#lastAt;
  }
}
