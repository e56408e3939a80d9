import { randomUUID } from 'node:crypto';
import type { IngestStatusStore, RunEntry } from '../../adapters/nats/ingest/ingest-store.js';
import { ErrorCode, ShoalError, isShoalError } from '../../adapters/protocol/errors.js';
import { abandonedReason, type IngestRunStatus } from '../../adapters/protocol/ingest.js';

/**
 * Who owns an ingest run's status (`run.<id>` in the ingest KV bucket), as a job's status is owned
 * through compare-and-set (status-store.ts):
 * - **claim**: the first submission of a run id creates the status atomically (KV create) and
 *   stamps its content hash; a concurrent or later submission reads what is stored: same content →
 *   that run (idempotent), other content → JOB_CONFLICT. Only an abandoned run (below) is taken
 *   over, again by compare-and-set, so of several resubmissions one restarts it.
 * - **heartbeat**: the owner rewrites the status every `heartbeat_ms` (also while nothing
 *   progresses), each write a compare-and-set on the revision it wrote last; a write that finds
 *   another owner's status stops the run (it was declared abandoned and taken over).
 * - **abandoned**: a reader (GET /v1/jobs/:id, a resubmission) that finds a queued or running run
 *   with no heartbeat for RUN_ABANDONED_AFTER_BEATS × heartbeat_ms marks it `failed` with TIMEOUT
 *   and `abandoned_at`: the coordinator died (SIGKILL, a lost machine) without writing a last state.
 */

/** How often a coordinator rewrites its run's status when nothing else does. @default 5000 */
export const DEFAULT_RUN_HEARTBEAT_MS = 5_000;
const MAX_CLAIM_ATTEMPTS = 20;

export interface RunLeaseOptions {
  /** @default DEFAULT_RUN_HEARTBEAT_MS */
  heartbeatMs?: number;
}

export type RunClaim = { lease: RunLease } | { existing: IngestRunStatus };

function conflict(existing: IngestRunStatus): ShoalError {
  return new ShoalError(
    ErrorCode.JOB_CONFLICT,
    `job id "${existing.job_id}" is already used by a different ingest run (pipeline "${existing.pipeline}", index "${existing.index}", ${existing.documents.total} documents, created ${existing.created_at}); resubmit the identical run to retry it, or choose another job id`,
    { details: { job_id: existing.job_id, kind: 'ingest', state: existing.state } },
  );
}

/**
 * Marks an abandoned run failed (compare-and-set on the revision read; a concurrent writer wins
 * and its status is returned). A run that is not abandoned comes back as it is.
 */
export async function settleAbandoned(store: IngestStatusStore, entry: RunEntry, now = Date.now()): Promise<IngestRunStatus> {
  const reason = abandonedReason(entry.status, now);
  if (reason === null) return entry.status;
  const at = new Date(now).toISOString();
  const failed: IngestRunStatus = { ...entry.status, state: 'failed', error: { code: ErrorCode.TIMEOUT, message: reason.slice(0, 2048) }, abandoned_at: at, updated_at: at };
  if ((await store.updateRun(failed, entry.revision)) !== null) return failed;
  return (await store.runEntry(entry.status.job_id))?.status ?? failed;
}

/** A run that was abandoned (marked so, or found so now): a resubmission of it may take it over. */
function isAbandoned(status: IngestRunStatus, now: number): boolean {
  return (status.state === 'failed' && status.abandoned_at !== undefined) || abandonedReason(status, now) !== null;
}

export class RunLease {
  /** This owner's lease id, written into every status it stores. */
  readonly id: string;
  readonly #store: IngestStatusStore;
  readonly heartbeatMs: number;
  #revision: number;
  /** The status to write next (the latest the run reported), or null when written. */
  #pending: IngestRunStatus | null = null;
  #latest: IngestRunStatus;
  #writing: Promise<void> | null = null;
  #timer: NodeJS.Timeout | null = null;
  #lost: ShoalError | null = null;
  /** The last status was given (finish): later reports are dropped. */
  #finished = false;
  readonly #lostController = new AbortController();

  private constructor(store: IngestStatusStore, status: IngestRunStatus, revision: number, heartbeatMs: number) {
    this.id = status.lease ?? randomUUID();
    this.#store = store;
    this.#latest = status;
    this.#revision = revision;
    this.heartbeatMs = heartbeatMs;
  }

  /**
   * Claims run `status.job_id` for `status` (its content_hash set): created, or taken over when
   * the stored run with the same content was abandoned; else the stored run (same content) or
   * JOB_CONFLICT (other content, or a stored run without a content hash).
   */
  static async claim(store: IngestStatusStore, status: IngestRunStatus, options: RunLeaseOptions = {}): Promise<RunClaim> {
    const heartbeatMs = options.heartbeatMs ?? DEFAULT_RUN_HEARTBEAT_MS;
    for (let attempt = 0; attempt < MAX_CLAIM_ATTEMPTS; attempt++) {
      const lease = randomUUID();
      const now = new Date();
      const stamped: IngestRunStatus = { ...status, lease, heartbeat_ms: heartbeatMs, heartbeat_at: now.toISOString(), updated_at: now.toISOString() };
      const created = await store.createRun(stamped);
      if (created.created) return { lease: new RunLease(store, stamped, created.revision, heartbeatMs) };
      const { existing } = created;
      if (existing.status.content_hash === undefined || existing.status.content_hash !== status.content_hash) throw conflict(existing.status);
      if (!isAbandoned(existing.status, now.getTime())) return { existing: existing.status };
      // Same content, coordinator gone: this submission starts it again, unless another one did first.
      const { abandoned_at: _was, error: _error, ...fresh } = stamped;
      const restarted: IngestRunStatus = { ...fresh, created_at: existing.status.created_at };
      const revision = await store.updateRun(restarted, existing.revision);
      if (revision !== null) return { lease: new RunLease(store, restarted, revision, heartbeatMs) };
    }
    throw new ShoalError(ErrorCode.UNAVAILABLE, `ingest run ${status.job_id} kept changing during ${MAX_CLAIM_ATTEMPTS} attempts to claim it; retry`);
  }

  /** The status as this owner last set it. */
  get status(): IngestRunStatus {
    return this.#latest;
  }

  /** Aborts when another coordinator took the run over (this one was declared abandoned). */
  get lost(): AbortSignal {
    return this.#lostController.signal;
  }

  /** Starts the heartbeat: the latest status rewritten every `heartbeatMs`. */
  start(): void {
    this.#timer ??= setInterval(() => void this.write(this.#latest).catch(() => undefined), this.heartbeatMs);
    this.#timer.unref();
  }

  /**
   * Writes `status` (stamped with this lease and a fresh heartbeat) by compare-and-set; writes
   * asked for while one is in flight are coalesced into the latest. Rejects with the NATS failure
   * (the next write retries) or JOB_CONFLICT once the run was taken over.
   */
  async write(status: IngestRunStatus): Promise<void> {
    // A progress report or heartbeat arriving after the last status must not overwrite it.
    if (this.#finished) return;
    return this.#write(status);
  }

  async #write(status: IngestRunStatus): Promise<void> {
    if (this.#lost !== null) throw this.#lost;
    this.#latest = status;
    this.#pending = status;
    while (this.#writing !== null) await this.#writing.catch(() => undefined);
    if (this.#pending === null) return;
    const writing = this.#flush();
    this.#writing = writing;
    try {
      await writing;
    } finally {
      if (this.#writing === writing) this.#writing = null;
    }
  }

  async #flush(): Promise<void> {
    const pending = this.#pending;
    if (pending === null) return;
    this.#pending = null;
    const now = new Date().toISOString();
    const body: IngestRunStatus = { ...pending, lease: this.id, heartbeat_ms: this.heartbeatMs, heartbeat_at: now, updated_at: now };
    try {
      const revision = await this.#store.updateRun(body, this.#revision);
      if (revision !== null) {
        this.#revision = revision;
        return;
      }
      // Our own earlier write may have landed with its answer lost (a NATS hiccup): still ours.
      const stored = await this.#store.runEntry(body.job_id);
      if (stored !== null && stored.status.lease === this.id && stored.status.abandoned_at === undefined) {
        this.#revision = stored.revision;
        const again = await this.#store.updateRun(body, stored.revision);
        if (again !== null) {
          this.#revision = again;
          return;
        }
      }
      this.#lose(stored?.status ?? null);
      throw this.#lost ?? new ShoalError(ErrorCode.JOB_CONFLICT, `ingest run ${body.job_id} is no longer this coordinator's`);
    } catch (error) {
      // A failed write leaves the status to write again (the next heartbeat or report).
      if (!(isShoalError(error) && error.code === ErrorCode.JOB_CONFLICT)) this.#pending ??= pending;
      throw error;
    }
  }

  #lose(stored: IngestRunStatus | null): void {
    if (this.#lost !== null) return;
    const why = stored?.abandoned_at !== undefined ? `was declared abandoned at ${stored.abandoned_at}` : 'was taken over by another coordinator';
    this.#lost = new ShoalError(ErrorCode.JOB_CONFLICT, `ingest run ${this.#latest.job_id} ${why} (its status stopped receiving this coordinator's heartbeats); this coordinator stops`);
    this.stop();
    this.#lostController.abort(this.#lost);
  }

  /** Why this coordinator lost the run, or null. */
  get lostReason(): ShoalError | null {
    return this.#lost;
  }

  /**
   * The run's last status: written, retried through NATS failures for up to `retryForMs`
   * (a final state lost would leave the run `running` until it is judged abandoned).
   */
  async finish(status: IngestRunStatus, retryForMs = 60_000): Promise<void> {
    this.stop();
    this.#finished = true;
    const until = Date.now() + retryForMs;
    for (let delay = 200; ; delay = Math.min(delay * 2, 5_000)) {
      try {
        await this.#write(status);
        return;
      } catch (error) {
        if ((isShoalError(error) && error.code === ErrorCode.JOB_CONFLICT) || Date.now() + delay > until) throw error;
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  /** Stops the heartbeat (idempotent). */
  stop(): void {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }
}
