import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';

/**
 * Notices a `--nats` run whose parse tasks nobody takes. While documents wait for a parse worker,
 * it asks every `intervalMs` whether one is there (the parse consumer has a pull request open or
 * tasks delivered); after `warnAfterMs` without one it warns once, after `failAfterMs` it fails
 * the run with UNAVAILABLE instead of letting it wait forever. A worker seen resets both clocks
 * (and the warning may come again later).
 */

export const NO_PARSE_WORKER = 'no worker runs the parse role: start `shoal worker --parse`';

export interface ParseWatchdogOptions {
  /** Whether a parse worker is there now (ParseTaskClient.parseWorkerSeen). */
  probe: () => Promise<boolean>;
  /** Documents published and not answered yet: nothing is checked while there are none. */
  waiting: () => number;
  /** @default 5000 */
  warnAfterMs?: number;
  /** The run's SHOAL_PARSE_WORKER_TIMEOUT_MS. @default 300000 */
  failAfterMs?: number;
  /** @default 1000 */
  intervalMs?: number;
  onWarning: (message: string) => void;
  onTimeout: (error: ShoalError) => void;
}

export const DEFAULT_PARSE_WORKER_TIMEOUT_MS = 300_000;

export class ParseWatchdog {
  readonly #options: ParseWatchdogOptions;
  #timer: NodeJS.Timeout | null = null;
  /** Since when documents wait with no worker seen (null: a worker is there, or nothing waits). */
  #absentSince: number | null = null;
  #warned = false;
  #checking = false;

  constructor(options: ParseWatchdogOptions) {
    this.#options = options;
  }

  start(): void {
    if (this.#timer !== null) return;
    this.#timer = setInterval(() => void this.#check(), this.#options.intervalMs ?? 1000);
    // A watchdog must not keep a finished process alive.
    this.#timer.unref();
  }

  async #check(): Promise<void> {
    if (this.#checking || this.#timer === null) return;
    this.#checking = true;
    try {
      if (this.#options.waiting() === 0) {
        this.#absentSince = null;
        return;
      }
      let seen: boolean;
      try {
        seen = await this.#options.probe();
      } catch {
        // NATS itself is failing: the run's own calls report that; this is only about workers.
        return;
      }
      if (seen) {
        this.#absentSince = null;
        this.#warned = false;
        return;
      }
      const now = performance.now();
      this.#absentSince ??= now;
      const absent = now - this.#absentSince;
      const failAfter = this.#options.failAfterMs ?? DEFAULT_PARSE_WORKER_TIMEOUT_MS;
      if (absent >= failAfter) {
        this.stop();
        this.#options.onTimeout(
          new ShoalError(ErrorCode.UNAVAILABLE, `${NO_PARSE_WORKER} (documents waited ${Math.round(absent / 1000)} s; SHOAL_PARSE_WORKER_TIMEOUT_MS=${failAfter})`),
        );
      } else if (!this.#warned && absent >= (this.#options.warnAfterMs ?? 5000)) {
        this.#warned = true;
        this.#options.onWarning(`${NO_PARSE_WORKER}; documents stay queued, and the run fails after ${Math.round(failAfter / 1000)} s without one (SHOAL_PARSE_WORKER_TIMEOUT_MS)`);
      }
    } finally {
      this.#checking = false;
    }
  }

  stop(): void {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }
}
