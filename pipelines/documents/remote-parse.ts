import type { ParseTaskClient } from '../../adapters/nats/ingest/parse-client.js';
import { ErrorCode, ShoalError, toShoalError } from '../../adapters/protocol/errors.js';
import type { DocumentStatus, DocumentStateName, ParseTaskSettings } from '../../adapters/protocol/ingest.js';
import { WIRE_VERSION } from '../../adapters/protocol/jobs.js';
import type { DocumentSource, ParseOutcome } from './document.js';
import { newParseToken, parseTaskCheck } from '../../adapters/nats/ingest/parse-task-token.js';
import { contentHash } from './identity.js';
import { ParseWatchdog } from './parse-watchdog.js';
import type { DocumentReader } from './runner.js';
import type { PendingSource } from './sources.js';

/**
 * The parse stage run by workers: a DocumentReader for the IngestRunner whose `parse` waits for
 * a worker's answer instead of parsing here. `start` publishes the parse tasks of every source
 * that needs parsing ahead of the runner (bounded by a window of documents published and not yet
 * read back), so workers parse while the runner chunks and encodes; one KV watch follows the
 * documents' statuses. It also records the later states (`encoded`, `committed`) the runner reports.
 */

/** Documents published and not yet handed to the runner, at most (their bytes and pages sit in the object store). */
const PUBLISH_WINDOW = 512;

interface Deferred {
  promise: Promise<DocumentStatus>;
  resolve: (status: DocumentStatus) => void;
  reject: (error: unknown) => void;
}

function deferred(): Deferred {
  let resolve!: (status: DocumentStatus) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<DocumentStatus>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // Rejections are read through parse(); one nobody asks for must not be unhandled.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

/** What the reader uses of the coordinator's parse-task client (tests stand in for NATS with it). */
export type ParseTaskPort = Pick<ParseTaskClient, 'parseWorkerSeen' | 'submit' | 'watch' | 'pages' | 'forget' | 'putDocument'>;

/** How a run notices that no worker takes its parse tasks (parse-watchdog.ts). */
export interface ParseWaitOptions {
  /** @default 5000 */
  warnAfterMs?: number;
  /** @default 300000 */
  failAfterMs?: number;
  /** Where the warning goes (the CLI's stderr, the gateway's log). */
  onWarning?: (message: string) => void;
  /** Called once when the run gives up waiting: the caller stops its runner. */
  onStalled?: (error: ShoalError) => void;
}

interface Published {
  doc: number;
  documentId: string;
  /** The task's secret (parse-task-token.ts) and the digest a worker's answer to it carries. */
  token: string;
  check: string;
  /** The document's size, read here before publishing (the parse worker's answer does not carry it). */
  bytes: number;
}

export class RemoteParseReader implements DocumentReader {
  readonly #client: ParseTaskPort;
  readonly #runId: string;
  readonly #settings: ParseTaskSettings;
  readonly #published = new Map<string, Published>();
  readonly #byDoc = new Map<number, Published>();
  /** Sources the publisher could not read (its read retries ran out): never published. */
  readonly #unreadable = new Map<string, unknown>();
  readonly #answers = new Map<number, Deferred>();
  readonly #stop = new AbortController();
  #window = 0;
  #windowWaiter: (() => void) | null = null;
  #failure: unknown = null;
  #tasks: Promise<void> | null = null;
  readonly #watchdog: ParseWatchdog;
  #stalled: ShoalError | null = null;
  /** Documents a worker failed, for the run's status. */
  failed = 0;
  /**
   * Document statuses under this run that answer no task it published (another document id or
   * task digest: a task someone else published under the run id): dropped, never read.
   */
  ignored = 0;
  readonly #onWarning: ((message: string) => void) | undefined;

  constructor(client: ParseTaskPort, runId: string, settings: ParseTaskSettings, wait: ParseWaitOptions = {}) {
    this.#client = client;
    this.#runId = runId;
    this.#settings = settings;
    this.#onWarning = wait.onWarning;
    this.#watchdog = new ParseWatchdog({
      probe: () => client.parseWorkerSeen(),
      waiting: () => this.#window,
      ...(wait.warnAfterMs === undefined ? {} : { warnAfterMs: wait.warnAfterMs }),
      ...(wait.failAfterMs === undefined ? {} : { failAfterMs: wait.failAfterMs }),
      onWarning: (message) => wait.onWarning?.(message),
      onTimeout: (error) => {
        this.#stalled = error;
        // The runner treats CANCELLED as the run's end, not as each document's failure.
        this.#abortAll(new ShoalError(ErrorCode.CANCELLED, error.message));
        wait.onStalled?.(error);
      },
    });
  }

  /** Why the run gave up waiting for parse workers (UNAVAILABLE), or null. */
  get stalled(): ShoalError | null {
    return this.#stalled;
  }

  #answer(doc: number): Deferred {
    let answer = this.#answers.get(doc);
    if (answer === undefined) {
      answer = deferred();
      this.#answers.set(doc, answer);
      // Asked after the run failed (no parse worker, NATS lost): no answer will come.
      if (this.#failure !== null) answer.reject(this.#failure);
    }
    return answer;
  }

  /** Publishes the tasks of the sources `skip` does not rule out (unchanged ones), and follows their statuses. */
  start(sources: readonly PendingSource[], skip: (uri: string, documentId: string) => boolean): void {
    void this.#watch().catch((error: unknown) => this.#abortAll(error));
    this.#watchdog.start();
    this.#tasks = this.#publish(sources, skip).catch((error: unknown) => this.#abortAll(error));
  }

  #abortAll(error: unknown): void {
    if (this.#stop.signal.aborted) return;
    this.#failure = error;
    for (const answer of this.#answers.values()) answer.reject(error);
  }

  async #watch(): Promise<void> {
    for await (const status of this.#client.watch(this.#runId, this.#stop.signal)) {
      if (status.state !== 'parsed' && status.state !== 'failed') continue;
      const published = this.#byDoc.get(status.doc);
      // Only the answer to the task this coordinator published: same document and task digest.
      if (published === undefined || status.document_id !== published.documentId || status.task !== published.check) {
        this.ignored += 1;
        if (this.ignored === 1) this.#onWarning?.(`ingest run ${this.#runId}: ignored a status of document ${status.doc} that answers no parse task this coordinator published (a task of an earlier coordinator of this run, or one published by someone else under its id)`);
        continue;
      }
      this.#answer(status.doc).resolve(status);
    }
  }

  async #publish(sources: readonly PendingSource[], skip: (uri: string, documentId: string) => boolean): Promise<void> {
    for (const [doc, pending] of sources.entries()) {
      if (this.#stop.signal.aborted) return;
      let loaded: Awaited<ReturnType<PendingSource['load']>>;
      try {
        loaded = await pending.load();
      } catch (error) {
        // The runner reads it too and records the failure (READ_FAILED); should its own read
        // succeed, parse() must not wait for a task that was never published.
        this.#unreadable.set(pending.uri, error);
        continue;
      }
      const documentId = contentHash(loaded.bytes);
      if (skip(pending.uri, documentId)) continue;
      while (this.#window >= PUBLISH_WINDOW) await new Promise<void>((resolve) => (this.#windowWaiter = resolve));
      this.#window += 1;
      const token = newParseToken();
      const published: Published = { doc, documentId, token, check: parseTaskCheck({ token }) ?? '', bytes: loaded.bytes.length };
      this.#published.set(pending.uri, published);
      this.#byDoc.set(doc, published);
      const { source } = loaded;
      await this.#client.submit(
        {
          run_id: this.#runId,
          doc,
          source: pending.uri,
          ...(source.id === undefined ? {} : { id: source.id }),
          ...(source.path === undefined ? {} : { name: source.path }),
          document_id: documentId,
          ...(source.text !== undefined && source.path === undefined ? { inline_text: true } : {}),
          parse: this.#settings,
          token,
        },
        loaded.bytes,
      );
    }
  }

  async #whenPublished(uri: string): Promise<Published> {
    for (;;) {
      const published = this.#published.get(uri);
      if (published !== undefined) return published;
      if (this.#unreadable.has(uri)) throw toShoalError(this.#unreadable.get(uri));
      if (this.#failure !== null) throw this.#failure;
      if (this.#stop.signal.aborted) throw new ShoalError(ErrorCode.CANCELLED, 'interrupted');
      // The runner asks in source order and the publisher runs ahead: this is a short wait.
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  async parse(source: DocumentSource): Promise<ParseOutcome> {
    const published = await this.#whenPublished(source.uri);
    const { doc, documentId } = published;
    const task = { run_id: this.#runId, doc, token: published.token };
    try {
      const status = await this.#answer(doc).promise;
      if (status.state === 'failed') {
        this.failed += 1;
        await this.#client.forget(task).catch(() => undefined);
        return { ok: false, source: source.uri, code: status.code ?? ErrorCode.INTERNAL, reason: status.reason ?? 'no reason recorded' };
      }
      const stored = await this.#client.pages(status, task);
      // The size and title a local parse gives (the document's automatic metadata): the bytes counted here when published, the title as the parse worker's reader found it.
      const document = { source: source.uri, type: stored.type, contentHash: documentId, pages: stored.pages, bytes: published.bytes, ...(stored.title === undefined ? {} : { title: stored.title }) };
      return { ok: true, document: source.id === undefined ? document : { ...document, id: source.id } };
    } catch (error) {
      throw toShoalError(error);
    } finally {
      this.#window -= 1;
      this.#windowWaiter?.();
      this.#windowWaiter = null;
    }
  }

  /** Records a later state of documents this run published (unknown sources are ignored). */
  async mark(entries: readonly { source: string; state: DocumentStateName; pages?: number; chunks?: number }[]): Promise<void> {
    await Promise.all(
      entries.map(async (entry) => {
        const published = this.#published.get(entry.source);
        if (published === undefined) return;
        const status: DocumentStatus = {
          v: WIRE_VERSION,
          run_id: this.#runId,
          doc: published.doc,
          source: entry.source,
          document_id: published.documentId,
          // Still this task's document: a redelivery of the task (a lost ack) is acked as answered.
          task: published.check,
          state: entry.state,
          ...(entry.pages === undefined ? {} : { pages: entry.pages }),
          ...(entry.chunks === undefined ? {} : { chunks: entry.chunks }),
          updated_at: new Date().toISOString(),
        };
        await this.#client.putDocument(status);
        if (entry.state === 'committed') await this.#client.forget({ run_id: this.#runId, doc: published.doc, token: published.token }).catch(() => undefined);
      }),
    );
  }

  /** Stops publishing and watching. */
  async close(): Promise<void> {
    this.#watchdog.stop();
    this.#stop.abort();
    this.#windowWaiter?.();
    await this.#tasks;
  }
}
