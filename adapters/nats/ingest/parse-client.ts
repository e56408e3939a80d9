import { jetstream, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { ParseTask, StoredPages, type DocumentStatus } from '../../protocol/ingest.js';
import { WIRE_VERSION } from '../../protocol/jobs.js';
import { parseWith } from '../../protocol/validate.js';
import { ensureIngestTopology, IngestStatusStore, type IngestNames, type ParseConsumerSettings } from './ingest-store.js';
import { toNatsShoalError } from '../connection/nats-errors.js';
import { withNatsRetry, type NatsRetryOptions } from '../connection/nats-retry.js';
import { pagesKey, parseTaskCheck, parseTaskMessageId } from './parse-task-token.js';
import { ParseDeadLetters } from './parse-dead-letters.js';
import { getJson, PayloadStore } from '../connection/payloads.js';
import type { Topology } from '../connection/topology.js';

/**
 * The coordinator's side of remote parsing: stores a document's bytes in the object store,
 * records it `queued` for its task (parse-task-standing.ts), publishes its parse task (message id
 * `<run>.<doc>.<token>`: parseTaskMessageId, so a re-publish adds nothing), then follows the document statuses workers write and reads back the stored pages.
 * The run's own status is the run lease's (pipelines/documents/run-lease.ts), written by compare-and-set.
 */

export type ParseTaskInput = Omit<ParseTask, 'v' | 'ref'>;

export class ParseTaskClient {
  readonly names: IngestNames;
  readonly status: IngestStatusStore;
  /** Poison tasks (max-deliveries advisories): a coordinator handles them too, so a run never waits on one. */
  readonly deadLetters: ParseDeadLetters;
  readonly #js: JetStreamClient;
  readonly #payloads: PayloadStore;
  readonly #jsm: JetStreamManager;

  readonly #retryOptions: NatsRetryOptions;

  private constructor(nc: NatsConnection, names: IngestNames, status: IngestStatusStore, payloads: PayloadStore, jsm: JetStreamManager, retry: NatsRetryOptions) {
    this.#retryOptions = retry;
    this.names = names;
    this.status = status;
    this.#js = jetstream(nc);
    this.#payloads = payloads;
    this.#jsm = jsm;
    this.deadLetters = new ParseDeadLetters({ js: this.#js, jsm, names, status });
  }

  /** Sets up the ingest topology (idempotent) on top of `topology`. The connection stays the caller's. */
  static async open(nc: NatsConnection, topology: Topology, consumer?: ParseConsumerSettings, retry: NatsRetryOptions = {}): Promise<ParseTaskClient> {
    const names = await ensureIngestTopology(nc, topology, consumer);
    const status = await IngestStatusStore.open(nc, names.bucket);
    return new ParseTaskClient(nc, names, status, new PayloadStore(nc, { bucket: topology.names.payloadBucket }), topology.jsm, retry);
  }

  /**
   * Whether some parse worker is there: it has a pull request waiting on the shared parse
   * consumer (an idle worker always has one open), or holds delivered tasks not yet acked (a
   * busy one). Neither, for a while, means no worker runs the parse role.
   */
  async parseWorkerSeen(): Promise<boolean> {
    try {
      const info = await this.#jsm.consumers.info(this.names.stream, this.names.parseConsumer);
      return info.num_waiting > 0 || info.num_ack_pending > 0;
    } catch (error) {
      throw toNatsShoalError(error, `read the parse consumer ${this.names.parseConsumer}`);
    }
  }

  /**
   * Stores the bytes, marks the document queued and publishes its task. Each step is idempotent
   * (the same object, the same whole value, a publish with a message id) and retried through a
   * brief NATS outage (nats-retry.ts), so a broker restart fails no document.
   */
  async submit(input: ParseTaskInput, bytes: Uint8Array): Promise<void> {
    const where = `ingest/${input.run_id}/${input.doc}.bin`;
    const ref = await this.#retry(`store the bytes of ${input.source}`, () => this.#payloads.put(where, bytes));
    const task = parseWith(ParseTask, { ...input, v: WIRE_VERSION, ref }, 'parse task');
    const check = parseTaskCheck(task);
    await this.putDocument({
      v: WIRE_VERSION,
      run_id: task.run_id,
      doc: task.doc,
      source: task.source,
      document_id: task.document_id,
      // The task this status waits for: workers answer only it (parse-task-standing.ts).
      ...(check === undefined ? {} : { task: check }),
      state: 'queued',
      updated_at: new Date().toISOString(),
    });
    await this.#retry(`publish the parse task of ${task.source}`, () =>
      this.#js.publish(this.names.parseSubject, JSON.stringify(task), { msgID: parseTaskMessageId(task), expect: { streamName: this.names.stream } }),
    );
  }

  #retry<T>(what: string, operation: () => Promise<T>): Promise<T> {
    return withNatsRetry(what, operation, { ...(this.#retryOptions.budgetMs === undefined ? {} : { budgetMs: this.#retryOptions.budgetMs }), ...(this.#retryOptions.onRetry === undefined ? {} : { onRetry: this.#retryOptions.onRetry }) });
  }

  /**
   * The pages a worker stored for a parsed document, read where the worker of `task` stores them
   * (never where a status says: the status is checked against the task, the place follows from it).
   */
  async pages(status: DocumentStatus, task: Pick<ParseTask, 'run_id' | 'doc' | 'token'>): Promise<StoredPages> {
    const ref = `obj://${this.#payloads.bucket}/${pagesKey(task)}`;
    if (status.pages_ref !== ref) throw new ShoalError(ErrorCode.INVALID_INPUT, `the status of ${status.source} names pages at ${status.pages_ref ?? 'nowhere'}, not where its task's worker stores them`);
    const stored = parseWith(StoredPages, await this.#retry(`read the pages of ${status.source}`, () => getJson(this.#payloads, ref)), `pages of ${status.source}`, ErrorCode.INTERNAL);
    if (stored.document_id !== status.document_id) throw toNatsShoalError(new Error('document id mismatch'), `read the pages of ${status.source}`);
    return stored;
  }

  /** Removes what a run stored for one document (bytes and pages), once it is committed or failed. */
  async forget(task: Pick<ParseTask, 'run_id' | 'doc' | 'token'>): Promise<void> {
    const bucket = this.#payloads.bucket;
    await this.#payloads.remove(`obj://${bucket}/ingest/${task.run_id}/${task.doc}.bin`);
    await this.#payloads.remove(`obj://${bucket}/${pagesKey(task)}`);
  }

  putDocument(status: DocumentStatus): Promise<void> {
    return this.#retry(`record document ${status.doc} of run ${status.run_id}`, () => this.status.putDocument(status));
  }

  watch(run: string, signal: AbortSignal): AsyncGenerator<DocumentStatus> {
    return this.status.watchDocuments(run, signal);
  }
}
