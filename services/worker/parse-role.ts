import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { ParseTaskConsumer, type ParseAnswer, type ParseInput } from '../../adapters/nats/ingest/parse-consumer.js';
import { ensureIngestTopology, IngestStatusStore } from '../../adapters/nats/ingest/ingest-store.js';
import { ParseDeadLetters } from '../../adapters/nats/ingest/parse-dead-letters.js';
import type { PayloadStore } from '../../adapters/nats/connection/payloads.js';
import type { Topology } from '../../adapters/nats/connection/topology.js';
import type { Logger } from '../../adapters/observability/logger.js';
import type { Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { Lifecycle } from '../../adapters/protocol/lifecycle.js';
import { builtinModelIds } from '../../adapters/sources/builtin-models.js';
import type { DocumentSource } from '../../pipelines/documents/document.js';
import { ParserCache } from '../../pipelines/documents/parser-cache.js';
import type { ParseLimits } from '../../pipelines/documents/parse-limits.js';

/**
 * The parse role of `shoal worker --parse` (SHOAL_PARSE=1): parse tasks of `shoal ingest --nats`
 * run through the pipeline's DocumentParser (parse threads here; OCR pages through this worker's
 * own engine, so an OCR-capable worker needs the OCR model's memory, not a served route). One
 * parser per distinct parse setting (a run's ocr mode, dpi, limits), kept for later tasks.
 */

/** Documents parsed at once: the parse pool has two threads by default. */
const PARSE_CONCURRENCY = 2;

export interface ParseRoleOptions {
  nc: NatsConnection;
  topology: Topology;
  engine: Engine;
  payloads: PayloadStore;
  workerId: string;
  ackWaitMs: number;
  maxDeliver: number;
  retryDelayMs: number;
  logger: Logger;
  /** This worker's ceilings on a task's limits (parse-limits.ts); defaults where absent. */
  limits?: Partial<ParseLimits>;
  /** Models this worker serves for extract: with the built-in ones, the OCR models a parse task may name. */
  extractModels: readonly string[];
}

export class ParseRole implements Lifecycle {
  readonly #consumer: ParseTaskConsumer;
  readonly #stop = new AbortController();
  readonly #parsers: ParserCache;
  readonly #ocrModels: ReadonlySet<string>;
  readonly #deadLetters: ParseDeadLetters;

  private constructor(engine: Engine, limits: Partial<ParseLimits>, ocrModels: ReadonlySet<string>, deadLetters: ParseDeadLetters, build: (parse: (input: ParseInput) => Promise<ParseAnswer>) => ParseTaskConsumer) {
    this.#parsers = new ParserCache(engine, limits, this.#stop.signal);
    this.#ocrModels = ocrModels;
    this.#deadLetters = deadLetters;
    this.#consumer = build((input) => this.#parse(input));
  }

  static async start(options: ParseRoleOptions): Promise<ParseRole> {
    const names = await ensureIngestTopology(options.nc, options.topology, { ackWaitMs: options.ackWaitMs, maxDeliver: options.maxDeliver });
    const status = await IngestStatusStore.open(options.nc, names.bucket);
    const js = jetstream(options.nc);
    const deadLetters = new ParseDeadLetters({ js, jsm: options.topology.jsm, names, status, logger: options.logger });
    const role = new ParseRole(
      options.engine,
      options.limits ?? {},
      new Set([...builtinModelIds(), ...options.extractModels]),
      deadLetters,
      (parse) =>
        new ParseTaskConsumer({
          js,
          names,
          status,
          payloads: options.payloads,
          parse,
          deadLetters,
          concurrency: PARSE_CONCURRENCY,
          ackWaitMs: options.ackWaitMs,
          maxDeliver: options.maxDeliver,
          retryDelayMs: options.retryDelayMs,
          workerId: options.workerId,
          logger: options.logger,
        }),
    );
    role.#consumer.start();
    deadLetters.start();
    return role;
  }

  async #parse(input: ParseInput): Promise<ParseAnswer> {
    // The engine would load (and download from the hub) whatever id a task names: a task comes
    // from anyone who may publish parse tasks, so only a built-in or served OCR model is run.
    const ocrModel = input.settings.ocrModel;
    if (!this.#ocrModels.has(ocrModel)) {
      return { ok: false, code: ErrorCode.MODEL_NOT_FOUND, reason: `OCR model "${ocrModel.slice(0, 200)}" is neither built in nor served for extract by this worker (${[...this.#ocrModels].join(', ')})` };
    }
    const source: DocumentSource = input.inlineText
      ? { uri: input.source, text: Buffer.from(input.bytes.buffer, input.bytes.byteOffset, input.bytes.byteLength).toString('utf8') }
      : { uri: input.source, bytes: input.bytes, ...(input.name === undefined ? {} : { path: input.name }) };
    if (input.id !== undefined) source.id = input.id;
    const outcome = await this.#parsers.get(input.settings).parse(source);
    // A parse stopped by shutdown is not the document's failure: thrown, the task is nak'ed.
    if (!outcome.ok && outcome.code === ErrorCode.CANCELLED) throw new ShoalError(ErrorCode.CANCELLED, outcome.reason);
    if (!outcome.ok) return { ok: false, code: outcome.code, reason: outcome.reason };
    const pages = outcome.document.pages.map((page) => ({
      page: page.page,
      text: page.text,
      ocr: page.ocr,
      ...(page.headings === undefined ? {} : { headings: page.headings }),
      ...(page.ocrReason === undefined ? {} : { ocrReason: page.ocrReason }),
    }));
    return { ok: true, type: outcome.document.type, pages, ...(outcome.document.title === undefined ? {} : { title: outcome.document.title }) };
  }

  get inFlight(): number {
    return this.#consumer.inFlight;
  }

  /** Stops pulling, finishes the documents being parsed, stops the parse threads. */
  async drain(): Promise<void> {
    await this.#consumer.drain();
    await this.#deadLetters.drain();
    await this.#parsers.close();
  }

  /** Stops at once: documents being parsed are nak'ed for another worker. */
  async close(): Promise<void> {
    this.#stop.abort();
    await this.#consumer.close();
    await this.#deadLetters.close();
    await this.#parsers.close();
  }
}
