import { MultiBar, Presets, type Options, type SingleBar } from 'cli-progress';
import type { DownloadProgress } from '../../adapters/sources/hub-download.js';
import type { ProgressMode } from './config.js';

/**
 * Everything the CLI shows on stderr besides errors: a bar for the input file (bytes processed,
 * lines written) and one per file while a model downloads. Bars only appear on a terminal (or
 * with --progress); otherwise downloads are logged as one line per finished file, and nothing
 * at all with --quiet, so stderr stays clean in pipelines and logs.
 */

export interface ProgressStream {
  isTTY?: boolean;
  write(text: string): unknown;
}

export interface ProgressOptions {
  mode: ProgressMode;
  quiet: boolean;
  stream: ProgressStream & NodeJS.WritableStream;
}

export interface InputProgress {
  update(bytes: number, lines: number): void;
}

const NO_INPUT_PROGRESS: InputProgress = Object.freeze({ update: () => undefined });

function megabytes(bytes: number): string {
  return (bytes / 1_048_576).toFixed(1);
}

/**
 * The one look of every bar (encode/extract input, ingest, classify): drawn on a terminal, and
 * with --progress on a non-terminal (CI logs) printed every few seconds instead.
 */
export function barOptions(stream: NodeJS.WritableStream & { isTTY?: boolean }, extra: Options = {}): Options {
  return { stream, hideCursor: true, clearOnComplete: false, noTTYOutput: stream.isTTY !== true, notTTYSchedule: 5_000, fps: 5, ...extra };
}

/** `42s`, `3m 05s`, `1h 02m`. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/**
 * The input bar's time estimate. cli-progress's own ETA reads "0s" until it has a rate, and its
 * rate would include the model load that precedes the first chunk; this one starts measuring at
 * the first finished chunk and says "ETA …" until a second one gives it a rate.
 */
export class InputEta {
  #first: { at: number; bytes: number } | null = null;
  #text = 'ETA …';

  constructor(private readonly total: number) {}

  update(bytes: number, now: number): string {
    if (this.#first === null) {
      this.#first = { at: now, bytes };
    } else if (bytes > this.#first.bytes && now > this.#first.at) {
      const rate = (bytes - this.#first.bytes) / ((now - this.#first.at) / 1000);
      this.#text = `ETA ${formatDuration((this.total - bytes) / rate)}`;
    }
    if (bytes >= this.total) this.#text = 'done';
    return this.#text;
  }

  get text(): string {
    return this.#text;
  }
}

export interface RunTotals {
  /** Lines this run wrote. */
  lines: number;
  /** Lines an earlier run wrote (--resume). */
  resumed: number;
  truncated: number;
  tokens: number;
  seconds: number;
}

/**
 * A whole number with commas between groups of three digits (52311 → 52,311). Not
 * toLocaleString: its first call loads ICU's number formatting, about 30 ms at the very end of
 * every command, after the last line is out.
 */
export function groupDigits(value: number): string {
  const text = String(Math.round(value));
  return text.replace(/\B(?=(\d{3})+$)/g, ',');
}

/** `encode: 2000 lines (37 truncated) in 8.4 s, 52,311 tokens/s`: the one line an encode run ends with. */
export function summaryLine(command: string, totals: RunTotals): string {
  const resumed = totals.resumed > 0 ? ` after ${groupDigits(totals.resumed)} resumed` : '';
  const rate = totals.seconds > 0 ? Math.round(totals.tokens / totals.seconds) : 0;
  return (
    `${command}: ${groupDigits(totals.lines)} lines${resumed} (${groupDigits(totals.truncated)} truncated) ` +
    `in ${totals.seconds.toFixed(1)} s, ${groupDigits(totals.tokens)} tokens, ${groupDigits(rate)} tokens/s`
  );
}

export class StderrProgress {
  readonly #options: ProgressOptions;
  #bars: MultiBar | null = null;
  readonly #downloads = new Map<string, SingleBar>();

  constructor(options: ProgressOptions) {
    this.#options = options;
  }

  /** Whether bars are drawn: --progress forces them, --no-progress and --quiet hide them. */
  get barsEnabled(): boolean {
    if (this.#options.mode === 'never') return false;
    if (this.#options.mode === 'always') return true;
    return !this.#options.quiet && this.#options.stream.isTTY === true;
  }

  #multiBar(): MultiBar {
    this.#bars ??= new MultiBar(barOptions(this.#options.stream, { etaBuffer: 50 }), Presets.shades_classic);
    return this.#bars;
  }

  /** A bar over the input file's bytes; a no-op for stdin (unknown size) or when bars are off. Its ETA is our own {estimate} (cli-progress reserves {eta}). */
  input(name: string, totalBytes: number | null): InputProgress {
    if (!this.barsEnabled || totalBytes === null || totalBytes === 0) return NO_INPUT_PROGRESS;
    const eta = new InputEta(totalBytes);
    const bar = this.#multiBar().create(
      totalBytes,
      0,
      { name, done: '0.0', size: megabytes(totalBytes), lines: 0, estimate: eta.text },
      { format: '{name} {bar} {percentage}% | {done}/{size} MB | {lines} lines | {estimate}' },
    );
    return {
      update: (bytes, lines) => bar.update(bytes, { done: megabytes(bytes), lines, estimate: eta.update(bytes, Date.now()) }),
    };
  }

  /** Hub download events (engine's onDownloadProgress). */
  readonly download = (event: DownloadProgress): void => {
    const key = `${event.repo}/${event.file}`;
    if (!this.barsEnabled) {
      if (event.done && !this.#options.quiet) {
        this.#options.stream.write(`downloaded ${key} (${megabytes(event.receivedBytes)} MB)\n`);
      }
      return;
    }
    let bar = this.#downloads.get(key);
    if (bar === undefined) {
      const total = event.totalBytes ?? Math.max(event.receivedBytes, 1);
      bar = this.#multiBar().create(
        total,
        0,
        { name: key, done: '0.0', size: megabytes(total) },
        { format: 'download {name} {bar} {percentage}% | {done}/{size} MB' },
      );
      this.#downloads.set(key, bar);
    }
    if (event.totalBytes === null && event.receivedBytes > bar.getTotal()) bar.setTotal(event.receivedBytes);
    bar.update(event.done ? bar.getTotal() : event.receivedBytes, { done: megabytes(event.receivedBytes) });
  };

  /**
   * A closing line (the run's summary) on stderr, where the bars would be drawn: on a terminal or
   * with --progress; never with --no-progress or --quiet, so stderr of scripts stays clean.
   */
  note(text: string): void {
    if (this.barsEnabled) this.#options.stream.write(`${text}\n`);
  }

  /** Draws the final state and gives the terminal line back. Idempotent. */
  stop(): void {
    if (this.#bars === null) return;
    this.#bars.stop();
    // On a terminal cli-progress ends the bars' line itself; in log mode it does not.
    if (this.#options.stream.isTTY !== true) this.#options.stream.write('\n');
    this.#bars = null;
    this.#downloads.clear();
  }
}
