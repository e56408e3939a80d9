import { Presets, SingleBar } from 'cli-progress';
import { barOptions } from '../../progress.js';

/**
 * The `shoal classify` bar on stderr: input read (bytes, so the ETA holds for any catalog size
 * without counting it first), products classified, products/s and time left. Drawn only where the
 * global progress setting allows bars and the input is a file of known size.
 */

function duration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '?';
  const s = Math.round(seconds);
  if (s >= 3600) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${s}s`;
}

export class ClassifyBar {
  readonly #bar: SingleBar | null;
  readonly #total: number;
  readonly #started = performance.now();
  #startBytes: number | null = null;
  #active = false;

  readonly #stream: NodeJS.WritableStream & { isTTY?: boolean };
  readonly #enabled: boolean;
  #categoryBar: SingleBar | null = null;

  constructor(stream: NodeJS.WritableStream & { isTTY?: boolean }, enabled: boolean, totalBytes: number | null) {
    this.#stream = stream;
    this.#enabled = enabled;
    this.#total = totalBytes ?? 0;
    this.#bar =
      enabled && this.#total > 0
        ? new SingleBar(barOptions(stream, { format: 'classify {bar} {percentage}% | {products} products | {rate} products/s | ETA {left}' }), Presets.shades_classic)
        : null;
  }

  /** `bytes`: input consumed; `products`: classified in this run (a resumed run counts from its start). */
  update(bytes: number, products: number): void {
    if (this.#bar === null) return;
    this.#startBytes ??= 0;
    const seconds = (performance.now() - this.#started) / 1000;
    const rate = seconds > 0 ? products / seconds : 0;
    const done = bytes - this.#startBytes;
    const left = done > 0 ? ((this.#total - bytes) * seconds) / done : Number.NaN;
    const payload = { products, rate: rate.toFixed(1), left: duration(left) };
    if (!this.#active) {
      this.#bar.start(this.#total, bytes, payload);
      this.#active = true;
      return;
    }
    this.#bar.update(bytes, payload);
  }

  /**
   * Embedding the categories (not cached): minutes with a real model and a 10,000-category
   * taxonomy. A line says so when it starts; on a terminal a bar follows it.
   */
  categories(embedded: number, total: number, log: (line: string) => void): void {
    if (embedded === 0) {
      log(`embedding ${total} categories (not cached yet; later runs read them from the cache)`);
      if (this.#enabled) {
        this.#categoryBar = new SingleBar(barOptions(this.#stream, { format: 'categories {bar} {percentage}% | {value}/{total} | ETA {eta_formatted}' }), Presets.shades_classic);
        this.#categoryBar.start(total, 0);
      }
      return;
    }
    this.#categoryBar?.update(embedded);
    if (embedded >= total) {
      this.#categoryBar?.stop();
      this.#categoryBar = null;
    }
  }

  /** Bytes skipped by --resume do not count toward the rate of this run. */
  skipped(bytes: number): void {
    this.#startBytes = bytes;
  }

  stop(): void {
    this.#categoryBar?.stop();
    this.#categoryBar = null;
    if (this.#bar === null || !this.#active) return;
    this.#bar.stop();
    this.#active = false;
  }
}
