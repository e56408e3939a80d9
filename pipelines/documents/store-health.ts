import type { RetryEvent } from '../../adapters/object-store/index.js';
import type { ShoalError } from '../../adapters/protocol/errors.js';
import type { Degraded } from '../../adapters/protocol/jobs.js';
import type { StoreWriteObserver } from '../../adapters/stores/shared/delivery.js';

/**
 * Whether the stores an ingest run depends on answer: the index it writes (through
 * RetryingStore's observer) and S3 when it reads `s3://` sources (through S3Store's retry hooks).
 * A store is failing from its first transient failure (a retry is coming) until its next call
 * that succeeds. While any store fails the run is `degraded: {reason, since}` (the earliest
 * failure): its status says so, the CLI shows it, the gateway sets `shoal_sink_degraded`.
 * The run itself just waits: the adapters retry with backoff, so nothing is failed or lost.
 */

/** One stretch of time a store was failing, for the run's summary. */
export interface DegradedPeriod {
  /** `s3` or the index backend (`pgvector`, `lancedb`...). */
  store: string;
  /** The first failure's message. */
  reason: string;
  since: string;
  /** When it answered again; null while it still fails. */
  until: string | null;
}

/** Told when the run's degraded mark changes: the store that changed, and the run's mark now (null: clear). */
export type HealthListener = (store: string, degraded: Degraded | null) => void;

/** Periods kept for the summary at most (a flapping store must not grow it without bound). */
const MAX_PERIODS = 100;

export class StoreHealth {
  readonly #failing = new Map<string, DegradedPeriod>();
  readonly #periods: DegradedPeriod[] = [];
  readonly #listeners = new Set<HealthListener>();

  /** The run's mark: the earliest failure of the stores failing now, or null. */
  get degraded(): Degraded | null {
    let first: DegradedPeriod | null = null;
    for (const period of this.#failing.values()) if (first === null || period.since < first.since) first = period;
    if (first === null) return null;
    const others = this.#failing.size - 1;
    const reason = `${first.store} unavailable, retrying: ${first.reason}${others > 0 ? ` (and ${others} other store${others > 1 ? 's' : ''})` : ''}`;
    return { reason: reason.slice(0, 1000), since: first.since };
  }

  /** Every period a store failed during the run, oldest first (the last ones may still be open). */
  get periods(): readonly DegradedPeriod[] {
    return this.#periods;
  }

  /** Stores failing now. */
  failingStores(): string[] {
    return [...this.#failing.keys()];
  }

  onChange(listener: HealthListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  failing(store: string, reason: string, now = new Date()): void {
    if (this.#failing.has(store)) return;
    const period: DegradedPeriod = { store, reason: reason.slice(0, 1000), since: now.toISOString(), until: null };
    this.#failing.set(store, period);
    if (this.#periods.length < MAX_PERIODS) this.#periods.push(period);
    this.#notify(store);
  }

  succeeded(store: string, now = new Date()): void {
    const period = this.#failing.get(store);
    if (period === undefined) return;
    period.until = now.toISOString();
    this.#failing.delete(store);
    this.#notify(store);
  }

  #notify(store: string): void {
    const degraded = this.degraded;
    for (const listener of this.#listeners) listener(store, degraded);
  }

  /** For openStore's `observer` (chained to `inner`, the metrics observer, when there is one). */
  sinkObserver(inner?: StoreWriteObserver): StoreWriteObserver {
    return {
      write: (backend, outcome, seconds) => inner?.write(backend, outcome, seconds),
      retrying: (backend: string, failure: ShoalError) => {
        inner?.retrying?.(backend, failure);
        this.failing(backend, failure.message);
      },
      succeeded: (backend: string) => {
        inner?.succeeded?.(backend);
        this.succeeded(backend);
      },
    };
  }

  /** For S3Store's `onRetry` / `onSuccess` (the store of `s3://` sources). */
  readonly s3 = {
    onRetry: (event: RetryEvent): void => this.failing('s3', event.error.message),
    onSuccess: (): void => this.succeeded('s3'),
  };
}
