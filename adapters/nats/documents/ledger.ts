import { createHash } from 'node:crypto';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';
import { DocumentEvent, type RunEvent, type RunOpen } from '../../protocol/documents.js';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { IngestRunStatus } from '../../protocol/ingest.js';
import { WIRE_VERSION } from '../../protocol/jobs.js';
import { checkJobId } from '../../protocol/subjects.js';
import { parseWith } from '../../protocol/validate.js';
import { writeIfRevision } from '../connection/kv-cas.js';
import { JS_CODES, isJsApiCode, toNatsShoalError } from '../connection/nats-errors.js';

/**
 * The ledger of document-job runs, in the ingest KV bucket (`<p>_ingest`), kept by the document
 * workers themselves (no coordinator):
 * - `done.<run>.<h>`: how a document ended (the terminal event itself), written once with a KV
 *   create, so the first worker to finish a document decides its outcome and every repeat (a
 *   redelivery after a lost ack, a republished job) answers the same event;
 * - `work.<run>.<h>`: the content and settings a worker is about to commit, written before the
 *   rows, so a worker redoing the document after a kill can tell "committed by this run" from
 *   "already in the index" (`h`: the first 32 hex of sha256(doc): a doc key may hold any character);
 * - `run.<run>`: the run's status (IngestRunStatus), changed only by compare-and-set. Ended
 *   documents are counted by ledger revision: the status records the revision up to which the
 *   `done` records were added (`counted_seq`), and a worker adds the later ones in one write. A
 *   worker killed between ending a document and counting it leaves the record for the next count,
 *   and no record is counted twice, whatever the interleaving.
 */

const Intent = z.strictObject({ document_id: z.string().regex(/^[0-9a-f]{64}$/), settings: z.string().min(1).max(128) });
export type Intent = z.infer<typeof Intent>;

/** Failures kept in a run's status (the events carry every one). */
const MAX_LISTED_FAILURES = 20;
/** Compare-and-set attempts before a count gives up (another worker keeps winning: the next count adds these records). */
const MAX_COUNT_ATTEMPTS = 50;

export function docHash(doc: string): string {
  return createHash('sha256').update(doc, 'utf8').digest('hex').slice(0, 32);
}

const doneKey = (run: string, doc: string): string => `done.${checkJobId(run)}.${docHash(doc)}`;
const workKey = (run: string, doc: string): string => `work.${checkJobId(run)}.${docHash(doc)}`;
const runKey = (run: string): string => `run.${checkJobId(run)}`;

/** Where a run's status comes from when a worker is the first to see the run. */
export interface RunSeed {
  pipeline: string;
  index: string;
  /** What the producer's submission decided (runContentHash), kept in the status it creates. */
  contentHash?: string;
}

export interface CountOutcome {
  status: IngestRunStatus;
  /** Set once the run is over (every announced document ended): its run event, to publish (deduplicated by id). */
  ended: RunEvent | null;
}

function emptyRun(runId: string, seed: RunSeed, now: string): IngestRunStatus {
  return {
    v: WIRE_VERSION,
    job_id: runId,
    kind: 'ingest',
    state: 'running',
    pipeline: seed.pipeline,
    index: seed.index,
    documents: { total: 0, ok: 0, failed: 0, unchanged: 0 },
    pages: 0,
    ocr_pages: 0,
    chunks: 0,
    failed: [],
    counted_seq: 0,
    ...(seed.contentHash === undefined ? {} : { content_hash: seed.contentHash }),
    created_at: now,
    updated_at: now,
  };
}

/** The status with `expected` applied: over once that many documents ended. */
function settle(status: IngestRunStatus): IngestRunStatus {
  const { ok, failed, unchanged } = status.documents;
  const ended = ok + failed + unchanged;
  const total = Math.max(status.expected ?? 0, ended);
  const next: IngestRunStatus = { ...status, documents: { ...status.documents, total } };
  const open = status.state === 'running' || status.state === 'queued';
  if (open && status.expected !== undefined && ended >= status.expected) {
    next.state = failed === 0 ? 'completed' : ok + unchanged > 0 ? 'partial' : 'failed';
  }
  return next;
}

export function runEventOf(status: IngestRunStatus): RunEvent | null {
  if (status.state !== 'completed' && status.state !== 'partial' && status.state !== 'failed') return null;
  return { v: WIRE_VERSION, run_id: status.job_id, state: status.state, documents: status.documents, pages: status.pages, chunks: status.chunks, finished_at: status.updated_at };
}

export class DocumentLedger {
  readonly #kv: KV;
  readonly #js: JetStreamClient;
  readonly #bucket: string;

  private constructor(kv: KV, js: JetStreamClient, bucket: string) {
    this.#kv = kv;
    this.#js = js;
    this.#bucket = bucket;
  }

  static async open(nc: NatsConnection, bucket: string): Promise<DocumentLedger> {
    try {
      return new DocumentLedger(await new Kvm(nc).open(bucket), jetstream(nc), bucket);
    } catch (error) {
      throw toNatsShoalError(error, `open the ingest status bucket ${bucket}`);
    }
  }

  async #json(key: string): Promise<{ value: unknown; revision: number } | null> {
    try {
      const entry = await this.#kv.get(key);
      if (entry === null || entry.operation !== 'PUT') return null;
      return { value: entry.json(), revision: entry.revision };
    } catch (error) {
      throw toNatsShoalError(error, `read ${key}`);
    }
  }

  /** How the document ended, when it did. */
  async ended(runId: string, doc: string): Promise<DocumentEvent | null> {
    const found = await this.#json(doneKey(runId, doc));
    return found === null ? null : parseWith(DocumentEvent, found.value, 'document event', ErrorCode.INTERNAL);
  }

  async intent(runId: string, doc: string): Promise<Intent | null> {
    const found = await this.#json(workKey(runId, doc));
    if (found === null) return null;
    const parsed = Intent.safeParse(found.value);
    return parsed.success ? parsed.data : null;
  }

  async putIntent(runId: string, doc: string, intent: Intent): Promise<void> {
    try {
      await this.#kv.put(workKey(runId, doc), JSON.stringify(intent));
    } catch (error) {
      throw toNatsShoalError(error, `write the intent of ${runId}/${doc}`);
    }
  }

  /** Ends a document: the event stored, or the one stored first (the outcome a repeat must answer). */
  async end(event: DocumentEvent): Promise<DocumentEvent> {
    const key = doneKey(event.run_id, event.doc);
    try {
      await this.#kv.create(key, JSON.stringify(parseWith(DocumentEvent, event, 'document event', ErrorCode.INTERNAL)));
      return event;
    } catch (error) {
      if (!isJsApiCode(error, JS_CODES.StreamWrongLastSequence)) throw toNatsShoalError(error, `end document ${event.run_id}/${event.doc}`);
    }
    const first = await this.ended(event.run_id, event.doc);
    if (first === null) throw new ShoalError(ErrorCode.UNAVAILABLE, `the end of ${event.run_id}/${event.doc} changed while it was written; retry`);
    return first;
  }

  /** The run's status, null when no worker or producer has written one. */
  async run(runId: string): Promise<{ status: IngestRunStatus; revision: number } | null> {
    const found = await this.#json(runKey(runId));
    return found === null ? null : { status: parseWith(IngestRunStatus, found.value, 'ingest run status', ErrorCode.INTERNAL), revision: found.revision };
  }

  /** Creates the status when missing (false when another writer was first), else compare-and-set at `revision`. */
  async #write(status: IngestRunStatus, revision: number | null): Promise<boolean> {
    const key = runKey(status.job_id);
    const body = JSON.stringify(parseWith(IngestRunStatus, status, 'ingest run status', ErrorCode.INTERNAL));
    return writeIfRevision(this.#kv, key, body, revision, `write ingest status ${key}`);
  }

  /** The `done` records of a run stored after ledger revision `after`, in revision order. */
  async #endedAfter(runId: string, after: number): Promise<{ seq: number; event: DocumentEvent }[]> {
    const subject = `$KV.${this.#bucket}.done.${checkJobId(runId)}.>`;
    const out: { seq: number; event: DocumentEvent }[] = [];
    try {
      const consumer = await this.#js.consumers.getPushConsumer(`KV_${this.#bucket}`, { filter_subjects: subject, opt_start_seq: after + 1 });
      const pending = (await consumer.info(true)).num_pending;
      if (pending === 0) {
        await consumer.delete().catch(() => undefined);
        return out;
      }
      const messages = await consumer.consume();
      for await (const msg of messages) {
        const parsed = DocumentEvent.safeParse(msg.json());
        // A record that is not an event is no document of ours; its revision is passed all the same.
        out.push({ seq: msg.seq, event: parsed.success ? parsed.data : UNREADABLE_EVENT });
        if (out.length >= pending) break;
      }
      messages.stop();
    } catch (error) {
      throw toNatsShoalError(error, `read the ended documents of run ${runId}`);
    }
    return out;
  }

  /**
   * Adds the documents ended since the last count to the run's status (creating it from `seed`
   * when missing) and settles it against `expected`. Safe to call from any number of workers at
   * once and again after a kill: each `done` record is counted exactly once.
   */
  async count(runId: string, seed: RunSeed): Promise<CountOutcome> {
    for (let attempt = 0; attempt < MAX_COUNT_ATTEMPTS; attempt++) {
      const current = await this.run(runId);
      const now = new Date().toISOString();
      const base = current?.status ?? emptyRun(runId, seed, now);
      const after = base.counted_seq ?? 0;
      const records = await this.#endedAfter(runId, after);
      if (current !== null && records.length === 0) {
        const settled = settle(current.status);
        if (settled.state === current.status.state) return { status: current.status, ended: runEventOf(current.status) };
      }
      let next: IngestRunStatus = { ...base, documents: { ...base.documents }, failed: [...base.failed], counted_seq: records.at(-1)?.seq ?? after, updated_at: now };
      for (const { event } of records) {
        if (event === UNREADABLE_EVENT) continue;
        if (event.state === 'committed') next.documents.ok += 1;
        else if (event.state === 'unchanged') next.documents.unchanged += 1;
        else {
          next.documents.failed += 1;
          if (next.failed.length < MAX_LISTED_FAILURES) next.failed.push({ source: event.source, code: event.code ?? ErrorCode.INTERNAL, reason: event.reason ?? '' });
        }
        if (event.state !== 'failed') {
          next.pages += event.pages;
          next.ocr_pages += event.ocr_pages ?? 0;
          next.chunks += event.chunks;
        }
      }
      next = settle(next);
      if (await this.#write(next, current?.revision ?? null)) return { status: next, ended: runEventOf(next) };
      // Another worker counted (or announced) meanwhile: read again and add what is still uncounted.
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * (attempt + 1)));
    }
    const latest = await this.run(runId);
    if (latest === null) throw new ShoalError(ErrorCode.UNAVAILABLE, `could not write the status of run ${runId}`);
    return { status: latest.status, ended: runEventOf(latest.status) };
  }

  /** A producer's announcement: the run completes once `expected` documents ended (a later announcement replaces it). */
  async announce(open: RunOpen, seed: RunSeed): Promise<CountOutcome> {
    for (let attempt = 0; attempt < MAX_COUNT_ATTEMPTS; attempt++) {
      const current = await this.run(open.run_id);
      const now = new Date().toISOString();
      const base = current?.status ?? emptyRun(open.run_id, { ...seed, pipeline: open.pipeline ?? seed.pipeline, index: open.index ?? seed.index }, now);
      const hash = base.content_hash ?? seed.contentHash;
      const next = settle({ ...base, expected: open.expected, ...(hash === undefined ? {} : { content_hash: hash }), updated_at: now });
      if (await this.#write(next, current?.revision ?? null)) {
        // Documents may have ended before the announcement: count them now.
        return this.count(open.run_id, seed);
      }
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * (attempt + 1)));
    }
    throw new ShoalError(ErrorCode.UNAVAILABLE, `could not record the announcement of run ${open.run_id}`);
  }
}

/** Stands for a ledger record that does not parse: passed over by the count (never written by Shoal). */
const UNREADABLE_EVENT: DocumentEvent = Object.freeze({
  v: WIRE_VERSION,
  run_id: 'x',
  doc: 'x',
  source: 'x',
  document_id: null,
  state: 'failed',
  chunks: 0,
  pages: 0,
  worker: '',
  finished_at: '',
}) as DocumentEvent;
