import { Kvm, type KV, type KvEntry } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, ShoalError, type SerializedError } from '../../protocol/errors.js';
import { JobStatus, WIRE_VERSION, type JobPart, type JobState } from '../../protocol/jobs.js';
import { parseWith } from '../../protocol/validate.js';
import { JS_CODES, isJsApiCode, toNatsShoalError } from '../connection/nats-errors.js';

/**
 * Job status in the KV bucket (key = job id), changed only with compare-and-set so concurrent
 * workers never overwrite each other. A part is counted once: the status carries a bitmap of
 * counted parts, checked and set in the same CAS write as the counters, so a part redelivered
 * after a crash (result already published, ack lost) leaves the counters alone.
 */

/** CAS retries before giving up; contention is between the few workers finishing parts of one job. */
const MAX_CAS_ATTEMPTS = 100;
const MAX_ERRORS = 20;

export const TERMINAL_STATES: ReadonlySet<JobState> = new Set<JobState>(['completed', 'failed', 'partial']);

export function bitmapHas(bitmap: string | undefined, index: number): boolean {
  if (bitmap === undefined || bitmap === '') return false;
  const bytes = Buffer.from(bitmap, 'base64');
  const byte = bytes[index >> 3];
  return byte !== undefined && (byte & (1 << (index & 7))) !== 0;
}

export function bitmapSet(bitmap: string | undefined, index: number, size: number): string {
  const bytes = Buffer.alloc(Math.ceil(size / 8));
  if (bitmap !== undefined && bitmap !== '') Buffer.from(bitmap, 'base64').copy(bytes);
  bytes[index >> 3] = (bytes[index >> 3] ?? 0) | (1 << (index & 7));
  return bytes.toString('base64');
}

/** `invalid`: the code of a stored value that is not a JobStatus (INTERNAL unless a caller says otherwise). */
function decode(entry: KvEntry, key: string, invalid: ErrorCode = ErrorCode.INTERNAL): JobStatus {
  let data: unknown;
  try {
    data = entry.json();
  } catch (error) {
    throw new ShoalError(invalid, `status of job ${key} is not JSON`, { cause: error });
  }
  return parseWith(JobStatus, data, `status of job ${key}`, invalid);
}

function isLive(entry: KvEntry | null): entry is KvEntry {
  return entry !== null && entry.operation === 'PUT';
}

/** What finishing one part did to the status. */
export interface PartRecord {
  /** False when the part had already been counted (a redelivery). */
  counted: boolean;
  status: JobStatus;
}

export type PartOutcome = { ok: true; items: number } | { ok: false; error: SerializedError };

/** What the submitter knows beyond a part: content hash, deadline, submission still in progress. */
export interface SubmissionFacts {
  contentHash: string;
  /** The job ends `failed`/`partial` with TIMEOUT when it has not finished by then. */
  deadlineAt: Date;
}

/** A new status for a job, `queued`, nothing counted. */
export function initialStatus(
  part: Pick<JobPart, 'job_id' | 'primitive' | 'model' | 'parts' | 'result'>,
  items: number,
  now = new Date(),
  facts?: SubmissionFacts,
): JobStatus {
  const at = now.toISOString();
  const submission = facts === undefined ? {} : { content_hash: facts.contentHash, submitted: false, deadline_at: facts.deadlineAt.toISOString() };
  return {
    ...submission,
    v: WIRE_VERSION,
    job_id: part.job_id,
    state: 'queued',
    primitive: part.primitive,
    model: part.model,
    parts: part.parts,
    parts_done: 0,
    parts_failed: 0,
    items,
    errors: [],
    result: part.result,
    created_at: at,
    updated_at: at,
  };
}

/**
 * Why an unfinished job is over, or null while it may still finish: past its deadline, or its
 * submission never completed (the submitter died mid-publish) within `submitTimeoutMs`.
 */
export function overdueReason(status: JobStatus, now: number, submitTimeoutMs: number): string | null {
  if (TERMINAL_STATES.has(status.state)) return null;
  const counted = status.parts_done + status.parts_failed;
  if (status.submitted === false && now - Date.parse(status.created_at) > submitTimeoutMs) {
    return `the submission never completed within ${submitTimeoutMs} ms (the submitter stopped before publishing every part); ${counted} of ${status.parts} parts finished`;
  }
  if (status.deadline_at !== undefined && now > Date.parse(status.deadline_at)) {
    return `the job passed its deadline ${status.deadline_at} with ${counted} of ${status.parts} parts finished`;
  }
  return null;
}

function finalState(status: JobStatus): JobState {
  if (status.parts_done + status.parts_failed < status.parts) return 'running';
  if (status.parts_failed === 0) return 'completed';
  return status.parts_done === 0 ? 'failed' : 'partial';
}

/**
 * The status of a part's job (null: none yet), or JOB_CONFLICT when the part cannot be counted
 * there: the status is of another job under the same id (forged, or a client bypassing the jobs
 * client), or is no job status at all (a client of its own wrote the key with other fields).
 * Counting it would mix two jobs, or fail on every delivery until the part ran out of them.
 */
export async function jobOfPart(store: StatusStore, part: Pick<JobPart, 'job_id' | 'part' | 'parts' | 'primitive' | 'model'>): Promise<JobStatus | null> {
  const status = await store.get(part.job_id, ErrorCode.JOB_CONFLICT);
  if (status !== null && (status.parts !== part.parts || status.model !== part.model || status.primitive !== part.primitive)) {
    throw new ShoalError(
      ErrorCode.JOB_CONFLICT,
      `part ${part.part}/${part.parts} (${part.primitive} on "${part.model}") does not belong to job ${part.job_id} (${status.parts} parts, ${status.primitive} on "${status.model}")`,
    );
  }
  return status;
}

export class StatusStore {
  readonly #kv: KV;

  private constructor(kv: KV) {
    this.#kv = kv;
  }

  /** Opens the bucket (ensureTopology creates it). */
  static async open(nc: NatsConnection, bucket: string): Promise<StatusStore> {
    try {
      return new StatusStore(await new Kvm(nc).open(bucket));
    } catch (error) {
      throw toNatsShoalError(error, `open the job status bucket ${bucket}`);
    }
  }

  async #entry(jobId: string): Promise<KvEntry | null> {
    try {
      return await this.#kv.get(jobId);
    } catch (error) {
      throw toNatsShoalError(error, `read status of job ${jobId}`);
    }
  }

  /**
   * The job's status, null when it has none. A stored value that is not a JobStatus (written by a
   * client of its own) fails with `invalid`: INTERNAL by default, JOB_CONFLICT for a worker
   * deciding what to do with a part of that job (it cannot count it there).
   */
  async get(jobId: string, invalid: ErrorCode = ErrorCode.INTERNAL): Promise<JobStatus | null> {
    const entry = await this.#entry(jobId);
    return isLive(entry) ? decode(entry, jobId, invalid) : null;
  }

  /** Creates the status unless the job already has one (a resubmission); returns what is stored. */
  async create(status: JobStatus): Promise<JobStatus> {
    try {
      await this.#kv.create(status.job_id, JSON.stringify(status));
      return status;
    } catch (error) {
      if (!isJsApiCode(error, JS_CODES.StreamWrongLastSequence)) throw toNatsShoalError(error, `create status of job ${status.job_id}`);
    }
    const existing = await this.get(status.job_id);
    if (existing === null) throw new ShoalError(ErrorCode.UNAVAILABLE, `status of job ${status.job_id} changed while it was created; retry`);
    return existing;
  }

  /**
   * Applies `change` with compare-and-set, retrying on conflicts; `change` returns null to leave
   * the status as it is. A missing status is started from `missing()` (a part published without a
   * status, or a status that expired).
   */
  async #update(jobId: string, missing: () => JobStatus, change: (current: JobStatus) => JobStatus | null): Promise<{ status: JobStatus; changed: boolean }> {
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      const entry = await this.#entry(jobId);
      const current = isLive(entry) ? decode(entry, jobId) : missing();
      const next = change(current);
      if (next === null) return { status: current, changed: false };
      try {
        const body = JSON.stringify(next);
        // A deleted key (tombstone) is recreated like a missing one.
        if (entry === null || !isLive(entry)) await this.#kv.create(jobId, body);
        else await this.#kv.update(jobId, body, entry.revision);
        return { status: next, changed: true };
      } catch (error) {
        if (!isJsApiCode(error, JS_CODES.StreamWrongLastSequence)) throw toNatsShoalError(error, `update status of job ${jobId}`);
      }
    }
    throw new ShoalError(ErrorCode.UNAVAILABLE, `status of job ${jobId} kept changing during ${MAX_CAS_ATTEMPTS} attempts to update it`);
  }

  /** queued → running, the first time a worker starts a part. */
  async markRunning(part: JobPart, items: number): Promise<void> {
    await this.#update(
      part.job_id,
      () => initialStatus(part, items),
      (current) => (current.state === 'queued' ? { ...current, state: 'running', updated_at: new Date().toISOString() } : null),
    );
  }

  /** Counts a finished part (done or failed) once; a part already counted changes nothing. */
  async recordPart(part: JobPart, outcome: PartOutcome): Promise<PartRecord> {
    const { status, changed } = await this.#update(
      part.job_id,
      () => initialStatus(part, outcome.ok ? outcome.items : 0),
      (current) => {
        // A job ended early (deadline, abandoned submission) stays as it ended.
        if (TERMINAL_STATES.has(current.state)) return null;
        if (part.part >= current.parts || bitmapHas(current.counted_parts, part.part)) return null;
        const next: JobStatus = {
          ...current,
          counted_parts: bitmapSet(current.counted_parts, part.part, current.parts),
          updated_at: new Date().toISOString(),
        };
        if (outcome.ok) next.parts_done = current.parts_done + 1;
        else {
          next.parts_failed = current.parts_failed + 1;
          if (current.errors.length < MAX_ERRORS) next.errors = [...current.errors, { ...outcome.error, part: part.part }];
        }
        next.state = finalState(next);
        return next;
      },
    );
    return { counted: changed, status };
  }

  /** Marks the submission complete (every part published); a job ended meanwhile is left as it is. */
  async markSubmitted(status: JobStatus): Promise<JobStatus> {
    const { status: stored } = await this.#update(
      status.job_id,
      () => status,
      (current) => (current.submitted === false && !TERMINAL_STATES.has(current.state) ? { ...current, submitted: true, updated_at: new Date().toISOString() } : null),
    );
    return stored;
  }

  /**
   * Ends an overdue job visibly: `partial` when some parts succeeded, else `failed`, with a
   * TIMEOUT error naming why. Returns the status as stored afterwards (unchanged when not overdue).
   */
  async expireIfOverdue(jobId: string, submitTimeoutMs: number, now: number = Date.now()): Promise<JobStatus | null> {
    const current = await this.get(jobId);
    if (current === null || overdueReason(current, now, submitTimeoutMs) === null) return current;
    const { status } = await this.#update(
      jobId,
      () => current,
      (latest) => {
        const reason = overdueReason(latest, now, submitTimeoutMs);
        if (reason === null) return null;
        const errors = latest.errors.length < MAX_ERRORS ? [...latest.errors, { code: ErrorCode.TIMEOUT, message: reason, part: 0 }] : latest.errors;
        return { ...latest, state: latest.parts_done > 0 ? 'partial' : 'failed', errors, updated_at: new Date(now).toISOString() };
      },
    );
    return status;
  }

  /**
   * Marks the job degraded (its results cannot reach their store now); an already degraded job
   * keeps its first `since`. A job without a status is left alone (nothing to show it on).
   */
  async markDegraded(jobId: string, reason: string, now = new Date()): Promise<void> {
    const current = await this.get(jobId);
    if (current === null || current.degraded !== undefined) return;
    await this.#update(jobId, () => current, (latest) =>
      latest.degraded !== undefined ? null : { ...latest, degraded: { reason: reason.slice(0, 1000), since: now.toISOString() }, updated_at: now.toISOString() },
    );
  }

  /** Removes the degraded mark after a successful write (one read when there is none). */
  async clearDegraded(jobId: string): Promise<void> {
    const current = await this.get(jobId);
    if (current?.degraded === undefined) return;
    await this.#update(jobId, () => current, (latest) => {
      if (latest.degraded === undefined) return null;
      const { degraded: _cleared, ...rest } = latest;
      return { ...rest, updated_at: new Date().toISOString() };
    });
  }

  /** Status changes of one job, starting with the current one; ends when `signal` aborts. */
  async *watch(jobId: string, signal?: AbortSignal): AsyncGenerator<JobStatus> {
    let watcher;
    try {
      watcher = await this.#kv.watch({ key: jobId });
    } catch (error) {
      throw toNatsShoalError(error, `watch status of job ${jobId}`);
    }
    const stop = (): void => watcher.stop();
    signal?.addEventListener('abort', stop, { once: true });
    try {
      for await (const entry of watcher) {
        if (isLive(entry)) yield decode(entry, jobId);
      }
    } finally {
      signal?.removeEventListener('abort', stop);
      watcher.stop();
    }
  }
}
