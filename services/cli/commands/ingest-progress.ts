import { Presets, SingleBar } from 'cli-progress';
import { barOptions } from '../progress.js';
import type { IngestProgress } from '../../../pipelines/documents/runner.js';

/**
 * The `shoal ingest` bar on stderr: documents read of total (and how many are committed), pages (OCR pages), chunks, the
 * document rate and cli-progress's ETA, and the stores the run waits on while one is down. Drawn only where the global progress setting allows bars.
 */

/** Time left at the read rate so far; writing the last wave is not in it (shown as "writing"). */
function eta(progress: IngestProgress, seconds: number): string {
  if (progress.read >= progress.total) return progress.done >= progress.total ? '0s' : 'writing';
  if (progress.read === 0 || seconds <= 0) return '?';
  const left = Math.round(((progress.total - progress.read) * seconds) / progress.read);
  return left >= 60 ? `${Math.floor(left / 60)}m${String(left % 60).padStart(2, '0')}s` : `${left}s`;
}

export class IngestBar {
  readonly #bar: SingleBar | null;
  readonly #started = performance.now();
  #active = false;
  #last: IngestProgress | null = null;
  /** Pages as the parser reads them (a long PDF moves the bar before it is finished). */
  #pages = 0;
  #ocrPages = 0;
  /** Stores failing now (shown while the run waits on them). */
  #failing: readonly string[] = [];

  constructor(stream: NodeJS.WritableStream & { isTTY?: boolean }, enabled: boolean) {
    this.#bar = enabled
      ? new SingleBar(
          barOptions(stream, {
            etaBuffer: 20,
            format: 'documents {bar} {value}/{total} read, {done} done | pages {pages} (OCR {ocr}) | chunks {chunks} | {rate} docs/s | ETA {left}{degraded}',
          }),
          Presets.shades_classic,
        )
      : null;
  }

  /** The parser's per-page callback. */
  readonly page = (info: { ocr: boolean }): void => {
    this.#pages += 1;
    if (info.ocr) this.#ocrPages += 1;
    if (this.#last !== null) this.update(this.#last);
  };

  /** The stores the run waits on now (none: the mark goes). */
  readonly degraded = (stores: readonly string[]): void => {
    this.#failing = stores;
    if (this.#last !== null) this.update(this.#last);
  };

  readonly update = (progress: IngestProgress): void => {
    this.#last = progress;
    if (this.#bar === null) return;
    const seconds = (performance.now() - this.#started) / 1000;
    const payload = {
      done: progress.done,
      pages: Math.max(progress.pages, this.#pages),
      ocr: Math.max(progress.ocrPages, this.#ocrPages),
      chunks: progress.chunks,
      rate: seconds > 0 ? (progress.read / seconds).toFixed(1) : '0.0',
      left: eta(progress, seconds),
      degraded: this.#failing.length === 0 ? '' : ` | degraded: ${this.#failing.join(', ')} unavailable, retrying`,
    };
    if (!this.#active) {
      this.#bar.start(Math.max(progress.total, 1), progress.read, payload);
      this.#active = true;
      return;
    }
    this.#bar.update(progress.read, payload);
  };

  stop(): void {
    if (this.#bar === null || !this.#active) return;
    this.#bar.stop();
    this.#active = false;
  }
}
