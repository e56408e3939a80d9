import { Kvm, type KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { ClassifyJobRecord, type ClassifyRunEnd } from '../../protocol/classify-jobs.js';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { WIRE_VERSION } from '../../protocol/jobs.js';
import { checkJobId } from '../../protocol/subjects.js';
import { parseWith } from '../../protocol/validate.js';
import { writeIfRevision } from '../connection/kv-cas.js';
import { toNatsShoalError } from '../connection/nats-errors.js';
import { bitmapHas } from '../jobs/status-store.js';

/**
 * The status of classification-job runs, in the ingest KV bucket (`classify.<run>`), kept by the
 * classify workers themselves (no coordinator) and created by the producer when it knows the run
 * first. Every change is a compare-and-set on the record's revision:
 * - a chunk is counted by setting its bit in `counted` (with its products added to `items_done`)
 *   in the same write, so a chunk done twice (a redelivery after a kill or a lost ack) counts
 *   once, whatever the interleaving of workers;
 * - the write that makes `chunks_done` reach `chunks` (a count, or the end message that says how
 *   many) also moves the run to `assembling`: its writer assembles the results, then moves it to
 *   `completed`. A worker killed while assembling leaves the run `assembling`, and the chunk
 *   message it had not acked brings the assembly to another worker (writing the same bytes again).
 */

/** Compare-and-set attempts before a write gives up (another worker keeps winning). */
const MAX_ATTEMPTS = 100;

/** What a worker knows of a run it is the first to see (no producer created the status). */
export interface ClassifyRunSeed {
  model: string;
  specRef: string;
  result: string;
}

export interface ChunkCount {
  record: ClassifyJobRecord;
  /** True when this call counted the chunk; false when it was counted before (or the run had failed). */
  counted: boolean;
}

const runKey = (runId: string): string => `classify.${checkJobId(runId)}`;

/** Sets bit `index`, growing the bitmap as needed (a run's chunk count may be unknown until its end). */
function withBit(bitmap: string, index: number): string {
  const current = Buffer.from(bitmap, 'base64');
  const bytes = Buffer.alloc(Math.max(current.length, (index >> 3) + 1));
  current.copy(bytes);
  bytes[index >> 3] = (bytes[index >> 3] ?? 0) | (1 << (index & 7));
  return bytes.toString('base64');
}

export function chunkCounted(record: ClassifyJobRecord, chunk: number): boolean {
  return bitmapHas(record.counted, chunk);
}

/** A new run's record (the producer's, or a worker's when it sees the run first). */
export function newClassifyRecord(runId: string, seed: ClassifyRunSeed, now: string, items = 0, contentHash?: string): ClassifyJobRecord {
  return {
    v: WIRE_VERSION,
    job_id: checkJobId(runId),
    kind: 'classify',
    state: 'queued',
    model: seed.model,
    items,
    items_done: 0,
    categories: null,
    error: null,
    chunks: null,
    chunks_done: 0,
    counted: '',
    spec_ref: seed.specRef,
    result: seed.result,
    ...(contentHash === undefined ? {} : { content_hash: contentHash }),
    created_at: now,
    updated_at: now,
  };
}

/** Once every chunk is counted, the run is assembled. */
function settle(record: ClassifyJobRecord): ClassifyJobRecord {
  const open = record.state === 'queued' || record.state === 'running';
  if (open && record.chunks !== null && record.chunks_done >= record.chunks) return { ...record, state: 'assembling' };
  return record;
}

export class ClassifyLedger {
  readonly #kv: KV;

  private constructor(kv: KV) {
    this.#kv = kv;
  }

  static async open(nc: NatsConnection, bucket: string): Promise<ClassifyLedger> {
    try {
      return new ClassifyLedger(await new Kvm(nc).open(bucket));
    } catch (error) {
      throw toNatsShoalError(error, `open the status bucket ${bucket}`);
    }
  }

  /** The run's record, null when no producer or worker has written one (or it expired). */
  async get(runId: string): Promise<{ record: ClassifyJobRecord; revision: number } | null> {
    const key = runKey(runId);
    try {
      const entry = await this.#kv.get(key);
      if (entry === null || entry.operation !== 'PUT') return null;
      return { record: parseWith(ClassifyJobRecord, entry.json(), 'classification run status', ErrorCode.INTERNAL), revision: entry.revision };
    } catch (error) {
      throw toNatsShoalError(error, `read ${key}`);
    }
  }

  /** Creates the record; false when one exists already (another producer or a worker was first). */
  async create(record: ClassifyJobRecord): Promise<boolean> {
    return this.#write(record, null);
  }

  async #write(record: ClassifyJobRecord, revision: number | null): Promise<boolean> {
    const key = runKey(record.job_id);
    const body = JSON.stringify(parseWith(ClassifyJobRecord, record, 'classification run status', ErrorCode.INTERNAL));
    return writeIfRevision(this.#kv, key, body, revision, `write ${key}`);
  }

  /**
   * Read, change, compare-and-set, until a write wins. `change` returns the next record, or null
   * to leave the current one as it is (then that is answered, with `changed` false).
   */
  async #change(runId: string, seed: ClassifyRunSeed, change: (current: ClassifyJobRecord) => ClassifyJobRecord | null): Promise<{ record: ClassifyJobRecord; changed: boolean }> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const found = await this.get(runId);
      const now = new Date().toISOString();
      const current = found?.record ?? newClassifyRecord(runId, seed, now);
      const next = change(current);
      if (next === null) {
        if (found !== null) return { record: current, changed: false };
        // Nothing to change on a run nobody recorded yet: it is recorded as it is.
        if (await this.#write(current, null)) return { record: current, changed: false };
      } else {
        const stamped = { ...next, updated_at: now };
        if (await this.#write(stamped, found?.revision ?? null)) return { record: stamped, changed: true };
      }
      // Another worker wrote meanwhile: read again and decide on what it wrote.
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 10 * Math.min(attempt + 1, 20)));
    }
    throw new ShoalError(ErrorCode.UNAVAILABLE, `could not write the status of classification run ${runId} (${MAX_ATTEMPTS} attempts lost to other writers); retry`);
  }

  /**
   * Counts a chunk once: its bit set and its products added, in one write. A run that failed (or
   * a chunk counted before) is answered unchanged with `counted` false.
   */
  async countChunk(runId: string, chunk: number, items: number, seed: ClassifyRunSeed, categories: number | null): Promise<ChunkCount> {
    const { record, changed } = await this.#change(runId, seed, (current) => {
      if (current.state === 'failed' || current.state === 'completed' || chunkCounted(current, chunk)) return null;
      if (current.chunks !== null && chunk >= current.chunks) throw new ShoalError(ErrorCode.INVALID_INPUT, `chunk ${chunk} of run ${runId} is past its end (the run has ${current.chunks} chunks)`);
      return settle({
        ...current,
        state: current.state === 'queued' ? 'running' : current.state,
        counted: withBit(current.counted, chunk),
        chunks_done: current.chunks_done + 1,
        items_done: current.items_done + items,
        categories: current.categories ?? categories,
      });
    });
    return { record, counted: changed };
  }

  /** The end message: how many chunks (and products) the run has; it may end the run's counting at once. */
  async announce(end: ClassifyRunEnd, seed: ClassifyRunSeed): Promise<ClassifyJobRecord> {
    const { record } = await this.#change(end.run_id, seed, (current) => {
      if (current.state === 'failed' || current.state === 'completed' || current.chunks !== null) return null;
      if (current.chunks_done > end.chunks) {
        throw new ShoalError(ErrorCode.INVALID_INPUT, `run ${end.run_id} ends at ${end.chunks} chunks, but ${current.chunks_done} are done already`);
      }
      return settle({ ...current, chunks: end.chunks, items: end.items });
    });
    return record;
  }

  /** `assembling` → `completed`, once the results are written (a run completed already stays as it is). */
  async complete(runId: string, seed: ClassifyRunSeed): Promise<ClassifyJobRecord> {
    const { record } = await this.#change(runId, seed, (current) => {
      if (current.state !== 'assembling') return null;
      return { ...current, state: 'completed', finished_at: new Date().toISOString() };
    });
    return record;
  }

  /** Ends the run `failed` with why (the first failure stands; a completed run stays completed). */
  async fail(runId: string, error: { code: string; message: string }, seed: ClassifyRunSeed): Promise<ClassifyJobRecord> {
    const { record } = await this.#change(runId, seed, (current) => {
      if (current.state === 'failed' || current.state === 'completed') return null;
      return { ...current, state: 'failed', error: { code: error.code.slice(0, 64), message: error.message.slice(0, 2_048) }, finished_at: new Date().toISOString() };
    });
    return record;
  }
}
