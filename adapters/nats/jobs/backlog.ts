import type { JetStreamManager, StoredMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { Counter, Gauge } from 'prom-client';
import { z } from 'zod';
import type { ShoalMetrics } from '../../observability/metrics.js';
import { isShoalError } from '../../protocol/errors.js';
import { JobPart } from '../../protocol/jobs.js';
import { PRIMITIVES, modelFromToken, type NatsNames, type Primitive } from '../../protocol/subjects.js';
import { JS_CODES, isJsApiCode } from '../connection/nats-errors.js';
import { PayloadStore, getJson } from '../connection/payloads.js';
import type { Topology } from '../connection/topology.js';

/**
 * The queued work of the jobs stream in items and (estimated) tokens, per model and primitive:
 * `shoal_backlog_parts`, `shoal_backlog_items`, `shoal_backlog_tokens`. NATS lag counts messages,
 * but one part may hold 1 or 1,000 texts, so a scaler on parts alone under- or over-provisions.
 *
 * Why read the stream itself: SHOAL_JOBS is a work queue, so a part stays in it from publish until
 * it is acked (done), term'ed (failed for good) or deleted by the dead-letter handler; a part being
 * worked on, waiting for redelivery, or held by a worker that crashed is still there, under the same
 * sequence. The set of messages in the stream IS the backlog (= num_pending + num_ack_pending of
 * the consumers), so redeliveries are never counted twice and a crashed worker's parts never
 * vanish. Each refresh asks the stream for its state (first/last sequence and the deleted
 * sequences in between), reads only parts it has not seen yet, and forgets the ones that left.
 *
 * Tokens are an estimate (the gateway holds no tokenizers, and the signal must exist while no
 * worker runs): ceil(characters / 4) + 2 special tokens per text, IMAGE_TOKENS per image; a score
 * item counts the query's tokens too (the model reads each pair).
 */

/** Tokens charged for one image item (a ViT-B/16 at 384 px has 577 patches; 224 px, 197). */
export const IMAGE_TOKENS = 256;
const CHARS_PER_TOKEN = 4;
const SPECIAL_TOKENS = 2;
/** Parts read per refresh at most, so a scrape of a huge backlog stays bounded; the rest follows next time. */
const DEFAULT_MAX_READS = 5_000;
const READ_WINDOW = 64;

export interface PartSize {
  primitive: Primitive;
  model: string;
  items: number;
  tokens: number;
}

export interface BacklogEntry {
  primitive: Primitive;
  model: string;
  parts: number;
  items: number;
  tokens: number;
}

export interface BacklogSnapshot {
  entries: BacklogEntry[];
  /** Parts in the stream not read yet (over maxReads); 0 once the view is complete. */
  unread: number;
}

export interface JobBacklogOptions {
  jsm: JetStreamManager;
  names: NatsNames;
  /** Reads by-reference payloads (`payload_ref`); without it such parts count 1 item, their tokens unknown (0). */
  payloads?: PayloadStore;
  /** @default 5000 */
  maxReads?: number;
}

const ItemShape = z.union([z.string(), z.looseObject({ text: z.string() }), z.looseObject({ image: z.unknown() })]);
const CountedRequest = z.looseObject({ items: z.array(ItemShape), query: ItemShape.optional() });

function itemTokens(item: z.infer<typeof ItemShape>): number {
  if (typeof item === 'string') return Math.ceil(item.length / CHARS_PER_TOKEN) + SPECIAL_TOKENS;
  if ('text' in item && typeof item.text === 'string') return Math.ceil(item.text.length / CHARS_PER_TOKEN) + SPECIAL_TOKENS;
  return IMAGE_TOKENS;
}

/** Items and estimated tokens of one primitive request (what a JobPart carries). */
export function requestSize(request: unknown): { items: number; tokens: number } {
  const parsed = CountedRequest.safeParse(request);
  if (!parsed.success) return { items: 0, tokens: 0 };
  const query = parsed.data.query === undefined ? 0 : itemTokens(parsed.data.query);
  let tokens = 0;
  for (const item of parsed.data.items) tokens += itemTokens(item) + query;
  return { items: parsed.data.items.length, tokens };
}

/**
 * The model of a subject token. A malformed token (a subject forged by a publisher, not made by
 * modelToken) still is one queued part, also in the consumer lag: it is reported under the raw token.
 */
function modelOfToken(token: string): string {
  try {
    return modelFromToken(token);
  } catch (error) {
    if (isShoalError(error)) return token;
    throw error;
  }
}

function isPrimitive(value: string): value is Primitive {
  return (PRIMITIVES as readonly string[]).includes(value);
}

export class JobBacklog {
  readonly #options: JobBacklogOptions;
  readonly #maxReads: number;
  /** Sequence → size of every part seen in the stream and not yet gone. */
  readonly #parts = new Map<number, PartSize>();
  /** Highest sequence read so far. */
  #readUpTo = 0;
  #refreshing: Promise<BacklogSnapshot> | null = null;
  /** Label pairs reported once: reported as 0 when their work is gone (a trigger needs 0, not a missing series). */
  readonly #known = new Map<string, { primitive: Primitive; model: string }>();

  constructor(options: JobBacklogOptions) {
    this.#options = options;
    this.#maxReads = options.maxReads ?? DEFAULT_MAX_READS;
  }

  /** The backlog now; concurrent callers (two scrapes) share one refresh. */
  refresh(): Promise<BacklogSnapshot> {
    this.#refreshing ??= this.#refresh().finally(() => (this.#refreshing = null));
    return this.#refreshing;
  }

  async #refresh(): Promise<BacklogSnapshot> {
    const { jsm, names } = this.#options;
    const info = await jsm.streams.info(names.jobsStream, { deleted_details: true });
    const { first_seq: first, last_seq: last } = info.state;
    // A stream purged or recreated (sequences went back): start over.
    if (last < this.#readUpTo) {
      this.#parts.clear();
      this.#readUpTo = 0;
    }
    const deleted = new Set(info.state.deleted ?? []);
    for (const seq of this.#parts.keys()) {
      if (seq < first || deleted.has(seq)) this.#parts.delete(seq);
    }
    const from = Math.max(this.#readUpTo + 1, first);
    const wanted: number[] = [];
    for (let seq = from; seq <= last && wanted.length < this.#maxReads; seq++) if (!deleted.has(seq)) wanted.push(seq);
    for (let i = 0; i < wanted.length; i += READ_WINDOW) {
      const window = wanted.slice(i, i + READ_WINDOW);
      const sizes = await Promise.all(window.map((seq) => this.#readPart(seq)));
      window.forEach((seq, k) => {
        const size = sizes[k];
        if (size !== undefined && size !== null) this.#parts.set(seq, size);
      });
    }
    const readTo = wanted.length === 0 ? last : (wanted[wanted.length - 1] ?? last);
    this.#readUpTo = Math.max(this.#readUpTo, wanted.length < this.#maxReads ? last : readTo);
    let unread = 0;
    for (let seq = this.#readUpTo + 1; seq <= last; seq++) if (!deleted.has(seq)) unread++;
    await this.#learnConsumers();
    return { entries: this.#entries(), unread };
  }

  /** Every model consumer on the stream gets a series (0 when idle), not only models seen with work. */
  async #learnConsumers(): Promise<void> {
    const { jsm, names } = this.#options;
    for await (const consumer of jsm.consumers.list(names.jobsStream)) {
      const subject = consumer.config.filter_subject;
      const parsed = subject === undefined ? null : this.#routeOf(subject);
      if (parsed !== null) this.#known.set(`${parsed.primitive} ${parsed.model}`, parsed);
    }
  }

  /** (primitive, model) of a job subject `<prefix>.jobs.<primitive>.<model-token>`; null for anything else. */
  #routeOf(subject: string): { primitive: Primitive; model: string } | null {
    const jobsPrefix = `${this.#options.names.prefix}.jobs.`;
    const [primitive, token, extra] = subject.startsWith(jobsPrefix) ? subject.slice(jobsPrefix.length).split('.') : [];
    if (primitive === undefined || token === undefined || extra !== undefined || !isPrimitive(primitive)) return null;
    return { primitive, model: modelOfToken(token) };
  }

  /** The size of the part at `seq`; null when it left the stream meanwhile or is not a part. */
  async #readPart(seq: number): Promise<PartSize | null> {
    const { jsm, names } = this.#options;
    let stored: StoredMsg | null;
    try {
      stored = await jsm.streams.getMessage(names.jobsStream, { seq });
    } catch (error) {
      if (isJsApiCode(error, JS_CODES.NoMessageFound)) return null;
      throw error;
    }
    if (stored === null) return null;
    const route = this.#routeOf(stored.subject);
    if (route === null) return null;
    const { primitive, model } = route;
    const part = JobPart.safeParse(this.#json(stored.data));
    // Not a JobPart (the worker dead-letters it): one part, nothing countable.
    if (!part.success) return { primitive, model, items: 0, tokens: 0 };
    if (part.data.request !== undefined) return { primitive, model, ...requestSize(part.data.request) };
    const payloads = this.#options.payloads;
    // Only this deployment's object store is read: an s3:// payload would cost a round trip to S3
    // (and its retries while S3 is down) per scrape, for an estimate.
    if (part.data.payload_ref === undefined || payloads === undefined || !part.data.payload_ref.startsWith('obj://')) return { primitive, model, items: 1, tokens: 0 };
    const request = await getJson(payloads, part.data.payload_ref).catch(() => null);
    return request === null ? { primitive, model, items: 1, tokens: 0 } : { primitive, model, ...requestSize(request) };
  }

  /** The backlog of a deployment's topology; by-reference payloads are read from its object store through `nc`. */
  static of(nc: NatsConnection, topology: Topology): JobBacklog {
    return new JobBacklog({ jsm: topology.jsm, names: topology.names, payloads: new PayloadStore(nc, { bucket: topology.names.payloadBucket }) });
  }

  #json(data: Uint8Array): unknown {
    try {
      return JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8'));
    } catch {
      return null;
    }
  }

  #entries(): BacklogEntry[] {
    const totals = new Map<string, BacklogEntry>();
    for (const { primitive, model } of this.#known.values()) totals.set(`${primitive} ${model}`, { primitive, model, parts: 0, items: 0, tokens: 0 });
    for (const size of this.#parts.values()) {
      const key = `${size.primitive} ${size.model}`;
      this.#known.set(key, { primitive: size.primitive, model: size.model });
      const entry = totals.get(key) ?? { primitive: size.primitive, model: size.model, parts: 0, items: 0, tokens: 0 };
      entry.parts += 1;
      entry.items += size.items;
      entry.tokens += size.tokens;
      totals.set(key, entry);
    }
    return [...totals.values()].sort((a, b) => a.model.localeCompare(b.model) || a.primitive.localeCompare(b.primitive));
  }
}

/**
 * Adds the backlog gauges to `metrics`' registry, computed on each scrape (no timer to stop).
 * Every gateway replica reports the same stream, so aggregate with max(), not sum().
 */
export function registerBacklogMetrics(metrics: ShoalMetrics, backlog: JobBacklog): void {
  // One set per registry (shoal dev shares its registry between gateway and worker).
  if (metrics.registry.getSingleMetric('shoal_backlog_parts') !== undefined) return;
  // prom-client collects the metrics of a scrape concurrently: the gauges and the failure counter
  // share one refresh, and a failed refresh is counted once and leaves the rest of /metrics intact.
  let pending: Promise<BacklogSnapshot | null> | null = null;
  const snapshot = (): Promise<BacklogSnapshot | null> => {
    pending ??= backlog
      .refresh()
      .catch(() => {
        failures.inc();
        return null;
      })
      .finally(() => (pending = null));
    return pending;
  };
  const failures: Counter = new Counter({
    name: 'shoal_backlog_refresh_failures_total',
    help: 'Scrapes whose backlog refresh failed (NATS unreachable); the backlog gauges keep their last values',
    registers: [metrics.registry],
    async collect() {
      await snapshot();
    },
  });
  const gauge = (name: string, help: string, pick: (entry: BacklogEntry) => number): Gauge<'primitive' | 'model'> =>
    new Gauge({
      name,
      help,
      labelNames: ['primitive', 'model'] as const,
      registers: [metrics.registry],
      async collect() {
        const current = await snapshot();
        for (const entry of current?.entries ?? []) this.set({ primitive: entry.primitive, model: entry.model }, pick(entry));
      },
    });
  gauge('shoal_backlog_parts', 'Job parts queued or in flight in the jobs stream (= num_pending + num_ack_pending of the model consumer)', (e) => e.parts);
  gauge('shoal_backlog_items', 'Items of the job parts queued or in flight in the jobs stream', (e) => e.items);
  gauge('shoal_backlog_tokens', 'Estimated tokens of the job parts queued or in flight in the jobs stream', (e) => e.tokens);
}
