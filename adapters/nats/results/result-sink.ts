import { access } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { JetStreamClient, JsMsg } from '@nats-io/jetstream';
import type { z } from 'zod';
import type { Logger } from '../../observability/logger.js';
import { ErrorCode, ShoalError, serializeError, toShoalError } from '../../protocol/errors.js';
import { JobPartResult, PrimitiveResult, type JobStatus } from '../../protocol/jobs.js';
import { JOB_ID_PATTERN } from '../../protocol/subjects.js';
import { parseWith } from '../../protocol/validate.js';
import { DurableFetchLoop } from '../connection/durable-fetch.js';
import { getJson, type PayloadStore } from '../connection/payloads.js';
import { decodeBody } from '../rpc/rpc-wire.js';
import type { ResultIndexWriter } from './result-index.js';
import type { StatusStore } from '../jobs/status-store.js';
import { ensureSinkConsumer, type Topology } from '../connection/topology.js';
import type { Lifecycle } from '../../protocol/lifecycle.js';
import { writeFileAtomically } from '../../support/atomic-write.js';
import { makeDirectory } from '../../support/directories.js';

/**
 * The results sink: a durable consumer on the results stream that writes every job's results
 * into a local folder, so a job submitted with the default `stream` target ends up as files:
 *
 *   <dir>/<job>/part-000000.jsonl     one JSON line per item (encode/extract) or score, job-wide indexes
 *   <dir>/<job>/part-000003.error.json   a part that failed: its error
 *
 * Each file is written beside and renamed, and a redelivered result rewrites the same file, so
 * at-least-once delivery gives each part exactly one file. Results a job asked to store
 * elsewhere (`{kind: "store", uri}`) are already where the caller wanted them and are skipped;
 * results too large for a message are read back from the object store.
 *
 * With `index` set, encode results go into a vector store instead (result-index.ts): a message is
 * acked only after the store committed its rows. While the store fails, the message is nak'ed
 * (redelivered later, never lost), its job's status is marked `degraded` and `onStoreHealth`
 * reports it (the `shoal_sink_degraded` gauge); the rest of a fetched batch is nak'ed at once
 * instead of each waiting on a store already known to be down. A job submitted with
 * `{kind: "index", index: NAME}` goes into the index of that name in `indexes` (SHOAL_INDEXES);
 * a sink without it leaves the job's results on the stream and the job `degraded`.
 */

/** A vector store the sink writes into. */
export interface IndexTarget {
  writer: ResultIndexWriter;
  /** The URI without its password, for messages. */
  display: string;
  /** Label of shoal_sink_degraded (pgvector, chroma...). */
  backend: string;
}

export interface ResultSinkOptions {
  js: JetStreamClient;
  topology: Topology;
  payloads: PayloadStore;
  /** Folder the results are written into (created when missing). */
  dir: string;
  /** Durable consumer name; sinks sharing it share the work. @default `<prefix>_results_sink` */
  durableName?: string;
  logger?: Logger;
  /**
   * Job statuses: when given, a result is written only if its job exists and has that part (same
   * part count, model and primitive), so a result forged on the results subject is refused.
   * @default no check
   */
  status?: StatusStore;
  /** Called after a part's file is written, or its rows committed (`path` is then the index). */
  onWritten?: (event: { jobId: string; part: number; path: string; lines: number }) => void;
  /** Write into this vector store instead of the folder (`shoal sink --index`). */
  index?: IndexTarget;
  /** Named indexes jobs with an `index` result target go into (SHOAL_INDEXES). @default none */
  indexes?: ReadonlyMap<string, IndexTarget>;
  /** Told whether the last write into a store succeeded (false: the store is failing). */
  onStoreHealth?: (target: IndexTarget, healthy: boolean) => void;
  /** After a failed index write, messages are nak'ed for this long without trying. @default 2000 */
  storeRetryMs?: number;
}

const FETCH_BATCH = 64;
const IDLE_RETRY_MS = 1000;
/** A write that failed (disk full, permissions) is tried again after this long. */
const WRITE_RETRY_MS = 5000;
/** How often a result waiting for an index this sink does not have is logged. */
const UNKNOWN_INDEX_WARN_MS = 60_000;

function partFileName(part: number, failed: boolean): string {
  return `part-${String(part).padStart(6, '0')}${failed ? '.error.json' : '.jsonl'}`;
}

/** One JSON line per result row: items for encode/extract, scores for score. */
function resultLines(result: z.infer<typeof PrimitiveResult>): string[] {
  const rows: readonly unknown[] = 'items' in result ? result.items : result.scores;
  return rows.map((row) => JSON.stringify(row));
}

export class ResultSink implements Lifecycle {
  readonly dir: string;
  readonly durableName: string;
  readonly #options: ResultSinkOptions;
  #loop: DurableFetchLoop | null = null;
  /** Stores that failed: until when each counts as down, and why (cleared by a good write). */
  readonly #down = new Map<IndexTarget, { until: number; reason: string }>();

  /** When each unknown index name was last warned about. */
  readonly #unknownIndexWarned = new Map<string, number>();

  constructor(options: ResultSinkOptions) {
    this.#options = options;
    this.dir = resolve(options.dir);
    this.durableName = options.durableName ?? options.topology.names.resultsSink;
  }

  /** Creates the folder and the durable consumer, then writes results until drain()/close(). */
  async start(): Promise<void> {
    if (this.#loop !== null) return;
    if (this.#options.index === undefined) await makeDirectory(this.dir);
    await ensureSinkConsumer(this.#options.topology, this.durableName);
    this.#loop = new DurableFetchLoop({
      js: this.#options.js,
      stream: this.#options.topology.names.resultsStream,
      consumer: this.durableName,
      batch: FETCH_BATCH,
      expiresMs: 2_000,
      retryMs: IDLE_RETRY_MS,
      what: 'results sink: fetching',
      handle: (m) => this.#handle(m),
      logger: this.#options.logger,
    });
    this.#loop.start();
  }

  async #handle(m: JsMsg): Promise<void> {
    const { logger } = this.#options;
    const decoded = decodeBody(m.data, m.headers);
    const parsed = decoded.ok ? JobPartResult.safeParse(decoded.value) : null;
    if (parsed?.success !== true || !JOB_ID_PATTERN.test(parsed.data.job_id)) {
      logger?.warn({ subject: m.subject, seq: m.seq }, 'results sink: not a job part result; skipped');
      m.term();
      return;
    }
    const message = parsed.data;
    try {
      const status = this.#options.status === undefined ? undefined : await this.#options.status.get(message.job_id);
      const named = status?.result.kind === 'index' ? status.result.index : null;
      const toFolder = named === null && this.#options.index === undefined;
      const refusal = await this.#refusal(message, status, toFolder && !m.info.redelivered);
      if (refusal !== null) {
        logger?.warn({ job: message.job_id, part: message.part, seq: m.seq, reason: refusal }, 'results sink: result refused');
        m.term();
        return;
      }
      if (named !== null) {
        await this.#handleNamed(m, message, named);
        return;
      }
      if (this.#options.index !== undefined) {
        await this.#handleIndexed(m, message, this.#options.index);
        return;
      }
      const written = await this.#write(message);
      if (written !== null) this.#options.onWritten?.({ jobId: message.job_id, part: message.part, ...written });
      await m.ackAck();
    } catch (error) {
      logger?.error({ job: message.job_id, part: message.part, err: String(error) }, 'results sink: writing failed; retrying later');
      m.nak(WRITE_RETRY_MS);
    }
  }

  /** A job whose results go into a named index: written when this sink has it, else left on the stream. */
  async #handleNamed(m: JsMsg, message: JobPartResult, name: string): Promise<void> {
    const index = this.#options.indexes?.get(name);
    if (index !== undefined) {
      await this.#handleIndexed(m, message, index);
      return;
    }
    const reason = `the results sink has no index named ${JSON.stringify(name)} (SHOAL_INDEXES); the results wait on the stream`;
    // Redelivered every few seconds until the index is configured: said once a minute per index, not at each redelivery.
    const now = Date.now();
    if (now - (this.#unknownIndexWarned.get(name) ?? 0) >= UNKNOWN_INDEX_WARN_MS) {
      this.#unknownIndexWarned.set(name, now);
      this.#options.logger?.warn({ job: message.job_id, part: message.part }, reason);
    }
    await this.#markDegraded(message.job_id, reason);
    m.nak(this.#options.storeRetryMs ?? WRITE_RETRY_MS);
  }

  async #handleIndexed(m: JsMsg, message: JobPartResult, index: IndexTarget): Promise<void> {
    const { logger, status } = this.#options;
    const down = this.#down.get(index);
    if (down !== undefined && Date.now() < down.until) {
      await this.#markDegraded(message.job_id, down.reason);
      m.nak(this.#options.storeRetryMs ?? WRITE_RETRY_MS);
      return;
    }
    const result = message.status === 'ok' ? await this.#resolve(message) : undefined;
    if (result === undefined) {
      // A failed part, or results a job stored elsewhere: no rows to write.
      await m.ackAck();
      return;
    }
    let written;
    try {
      written = await index.writer.write(message, result);
    } catch (error) {
      const retryMs = this.#options.storeRetryMs ?? WRITE_RETRY_MS;
      const reason = `cannot write into ${index.display}: ${toShoalError(error).message}`;
      this.#down.set(index, { until: Date.now() + retryMs, reason });
      logger?.error({ job: message.job_id, part: message.part, err: reason }, 'results sink: index write failed; redelivering later');
      this.#options.onStoreHealth?.(index, false);
      await this.#markDegraded(message.job_id, reason);
      m.nak(retryMs);
      return;
    }
    this.#down.delete(index);
    this.#options.onStoreHealth?.(index, true);
    await status?.clearDegraded(message.job_id);
    if (written !== null) this.#options.onWritten?.({ jobId: message.job_id, part: message.part, path: index.display, lines: written.rows });
    await m.ackAck();
  }

  /** Shows the failure on the job's status; a status that cannot be updated now only loses the flag, not the result. */
  async #markDegraded(jobId: string, reason: string): Promise<void> {
    try {
      await this.#options.status?.markDegraded(jobId, reason);
    } catch (error) {
      this.#options.logger?.warn({ job: jobId, err: String(error) }, 'results sink: could not mark the job degraded');
    }
  }

  /** The part's result, read back when it was stored for size; null for results a job stored elsewhere. */
  async #resolve(message: JobPartResult): Promise<z.infer<typeof PrimitiveResult> | undefined> {
    if (message.result !== undefined || message.result_ref === undefined) return message.result;
    // Only results this deployment stored for size are ours to copy; a job's own store target already has them.
    if (!message.result_ref.startsWith(`obj://${this.#options.payloads.bucket}/`)) return undefined;
    const body = await getJson(this.#options.payloads, message.result_ref);
    return parseWith(PrimitiveResult, body, `stored result ${message.result_ref}`, ErrorCode.INTERNAL);
  }

  /**
   * Why a result must not be written, or null. It must belong to a part of an existing job, and
   * must not replace a part's file written from another message: a part has one result message
   * (deduplicated by its message id), so a second, fresh one for a written part is not the
   * worker's (a redelivery of the same message may rewrite it).
   */
  async #refusal(message: JobPartResult, status: JobStatus | null | undefined, checkFiles: boolean): Promise<string | null> {
    if (status === null) return `job ${message.job_id} does not exist`;
    if (status !== undefined && (status.parts !== message.parts || status.model !== message.model || status.primitive !== message.primitive)) {
      return `the result (${message.primitive} on "${message.model}", ${message.parts} parts) does not match job ${message.job_id} (${status.primitive} on "${status.model}", ${status.parts} parts)`;
    }
    if (checkFiles) {
      const folder = join(this.dir, message.job_id);
      for (const failed of [false, true]) {
        const exists = await access(join(folder, partFileName(message.part, failed))).then(
          () => true,
          () => false,
        );
        if (exists) return `part ${message.part} of job ${message.job_id} already has a result file; a second result message for it is not the worker's`;
      }
    }
    return null;
  }

  async #write(message: JobPartResult): Promise<{ path: string; lines: number } | null> {
    const folder = join(this.dir, message.job_id);
    if (message.status === 'error') {
      await makeDirectory(folder);
      const path = join(folder, partFileName(message.part, true));
      const error = message.error ?? serializeError(new ShoalError(ErrorCode.INTERNAL, 'the part failed without an error'));
      await writeFileAtomically(path, `${JSON.stringify({ job_id: message.job_id, part: message.part, model: message.model, worker: message.worker, error }, null, 2)}\n`);
      return { path, lines: 0 };
    }
    const result = await this.#resolve(message);
    if (result === undefined && message.result_ref !== undefined) return null;
    if (result === undefined) throw new ShoalError(ErrorCode.INTERNAL, `result ${message.part} of job ${message.job_id} has neither a result nor a reference`);
    const lines = resultLines(result);
    await makeDirectory(folder);
    const path = join(folder, partFileName(message.part, false));
    await writeFileAtomically(path, lines.length === 0 ? '' : `${lines.join('\n')}\n`);
    return { path, lines: lines.length };
  }

  /** Stops after the batch in hand (its messages are written and acked, or redelivered later). */
  async drain(): Promise<void> {
    await this.#loop?.drain();
    await this.#options.index?.writer.close();
    for (const target of this.#options.indexes?.values() ?? []) await target.writer.close();
  }

  close(): Promise<void> {
    return this.drain();
  }
}
