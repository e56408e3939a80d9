import { AckPolicy, DeliverPolicy, DiscardPolicy, RetentionPolicy, StorageType, jetstreamManager, type JetStreamManager, type StreamConfig } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { Objm } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { natsNames, type NatsNames, type Primitive } from '../../protocol/subjects.js';
import { parseWith } from '../../protocol/validate.js';
import { JS_CODES, isConcurrentCreate, isJsApiCode, jsApiCode, toNatsShoalError } from './nats-errors.js';
import { STREAM_BYTES_CEILING, createAutoSized, explicitSizeRefused, isNoRoom } from './stream-sizing.js';

/**
 * Creates, idempotently, everything Shoal needs on the JetStream server (docs/nats.md):
 * - `<P>_JOBS`: work-queue stream of job parts, `<prefix>.jobs.<primitive>.<model-token>`;
 * - one durable pull consumer per primitive and model, filtered on its exact subject;
 * - `<P>_RESULTS`: results per part, deduplicated by `Nats-Msg-Id` = `<job>.<part>`;
 * - `<P>_DLQ`: dead letters (original body, reason headers);
 * - `<P>_JOBS_MAX_DELIVERIES`: the server's max-deliveries advisories for the jobs stream, kept
 *   durably so a dead letter is handled even when no worker was connected when it happened;
 * - KV bucket of job status, object store of payloads and results over the message limit.
 * Every service calls `ensureTopology` at start; settings that differ from the server's are updated.
 */

const SECOND_NS = 1_000_000_000;
const DAY_S = 86_400;

export const TopologySettings = z
  .strictObject({
    /** Subject prefix; names derive from it (natsNames). @default 'shoal' */
    prefix: z.string().default('shoal'),
    /** @default 'file' */
    storage: z.enum(['file', 'memory']).default('file'),
    /** Stream replicas (clustered JetStream). @default 1 */
    replicas: z.number().int().min(1).max(5).default(1),
    /** How long results stay in the results stream. @default 7 days */
    resultsMaxAgeSeconds: z.number().int().min(60).default(7 * DAY_S),
    /**
     * How long a job part may wait in the jobs stream before it is dropped (a part for a model no
     * worker ever comes for must not be kept forever); jobs end visibly at their own deadline
     * before that. @default 7 days
     */
    jobsMaxAgeSeconds: z.number().int().min(60).default(7 * DAY_S),
    /**
     * Bytes the jobs stream (and the ingest stream) may hold; past it new parts are refused
     * (publish fails), none are dropped. JetStream reserves it in the server's store.
     * @default unset: sized from the server's free store when the stream is created (a quarter of
     * it, at most 8 GiB, at least 64 MiB; stream-sizing.ts); an existing stream keeps its size
     */
    jobsMaxBytes: z.number().int().min(1024 * 1024).optional(),
    /** Bytes the results stream may hold; past it the oldest results are dropped. @default unset: sized as jobsMaxBytes */
    resultsMaxBytes: z.number().int().min(1024 * 1024).optional(),
    /** How long job status stays in the KV bucket. @default 7 days */
    statusMaxAgeSeconds: z.number().int().min(60).default(7 * DAY_S),
    /** How long payloads and large results stay in the object store. @default 7 days */
    payloadMaxAgeSeconds: z.number().int().min(60).default(7 * DAY_S),
    /** How long dead letters are kept. @default 30 days */
    deadLetterMaxAgeSeconds: z.number().int().min(60).default(30 * DAY_S),
    /** Publish dedupe window of the jobs and results streams: resubmitting a job, or redelivering a part, inside it adds nothing. @default 1 hour */
    duplicateWindowSeconds: z.number().int().min(1).default(3600),
  })
  .refine((s) => s.duplicateWindowSeconds <= s.resultsMaxAgeSeconds, 'duplicateWindowSeconds must not exceed resultsMaxAgeSeconds')
  .refine((s) => s.duplicateWindowSeconds <= s.jobsMaxAgeSeconds, 'duplicateWindowSeconds must not exceed jobsMaxAgeSeconds');
export type TopologySettings = z.output<typeof TopologySettings>;
export type TopologySettingsInput = z.input<typeof TopologySettings>;

export const ConsumerSettings = z.strictObject({
  /** Time a worker has to ack a part before it is redelivered; workers extend it with working(). @default 30000 */
  ackWaitMs: z.number().int().min(500).max(3_600_000).default(30_000),
  /** Deliveries of a part before it is dead-lettered. @default 5 */
  maxDeliver: z.number().int().min(1).max(1000).default(5),
  /** Parts delivered and not yet acked, over all workers of one consumer. @default 10000 */
  maxAckPending: z.number().int().min(1).default(10_000),
});
export type ConsumerSettings = z.output<typeof ConsumerSettings>;
export type ConsumerSettingsInput = z.input<typeof ConsumerSettings>;

/**
 * The oldest nats-server Shoal replicates streams on (replicas > 1). Before 2.9.21 a clustered
 * stream let two compare-and-set writes of one key made at once both succeed (the server checked
 * the expected revision before either was applied; nats-server issue 4320), so job status updates
 * made by concurrent parts were lost and such jobs never completed; and before 2.9.15 a clustered
 * server restarted after a crash could panic replaying a stream update it had no store for.
 */
export const MIN_REPLICATED_SERVER = '2.9.21';

function olderThan(version: string, minimum: string): boolean {
  const parse = (text: string): number[] | null => /^v?(\d+)\.(\d+)\.(\d+)/.exec(text)?.slice(1, 4).map(Number) ?? null;
  const have = parse(version);
  const need = parse(minimum);
  if (have === null || need === null) return false;
  for (let i = 0; i < 3; i++) if ((have[i] ?? 0) !== (need[i] ?? 0)) return (have[i] ?? 0) < (need[i] ?? 0);
  return false;
}

/** Refuses replicated streams on a server too old to keep them consistent (MIN_REPLICATED_SERVER); ensureTopology calls it. */
export function checkReplicatedServer(version: string | undefined, replicas: number): void {
  if (replicas <= 1 || version === undefined || !olderThan(version, MIN_REPLICATED_SERVER)) return;
  throw new ShoalError(
    ErrorCode.CONFIG_INVALID,
    `${replicas} stream replicas (topology setting replicas, SHOAL_STREAM_REPLICAS) need nats-server ${MIN_REPLICATED_SERVER} or newer, and this server is ${version}: ` +
      'older clustered servers let two concurrent updates of one job status both succeed, so job progress is lost and jobs never complete. Upgrade the NATS servers, or use 1 replica',
    { details: { serverVersion: version, replicas } },
  );
}

/**
 * The JetStream answer behind a failure (the error or one of its causes) that says the replicas
 * cannot be placed: more than the cluster's servers, or any on a server that is not clustered.
 */
function replicasRefusal(error: unknown): string | null {
  for (let current: unknown = error, depth = 0; current instanceof Error && depth < 5; current = current.cause, depth++) {
    const code = jsApiCode(current);
    if (code === JS_CODES.ReplicasNotSupported || (code === JS_CODES.NoPeers && !isNoRoom(current))) return current.message;
  }
  return null;
}

export function resolveTopologySettings(input: TopologySettingsInput = {}): TopologySettings {
  return Object.freeze(parseWith(TopologySettings, input, 'NATS topology settings', ErrorCode.CONFIG_INVALID));
}

export function resolveConsumerSettings(input: ConsumerSettingsInput = {}): ConsumerSettings {
  return Object.freeze(parseWith(ConsumerSettings, input, 'NATS consumer settings', ErrorCode.CONFIG_INVALID));
}

/** Names this module adds to natsNames: the stream and durable consumer of max-deliveries advisories. */
export function advisoryNames(names: NatsNames): { stream: string; subject: string; consumer: string } {
  return {
    stream: `${names.jobsStream}_MAX_DELIVERIES`,
    subject: `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${names.jobsStream}.*`,
    consumer: 'dead_letters',
  };
}

type StreamSpec = Pick<StreamConfig, 'name' | 'subjects' | 'retention' | 'max_age' | 'duplicate_window' | 'storage' | 'num_replicas' | 'discard'> &
  Partial<Pick<StreamConfig, 'max_bytes'>>;

/**
 * The byte limit of a stream that reserves store: a size that was set (and the setting's name,
 * for the message when it does not fit), or sized from the free store (stream-sizing.ts).
 */
type StreamBytes = { kind: 'set'; bytes: number; setting: string } | { kind: 'auto'; shares: number; ceiling: number; own: readonly string[] };

/**
 * Creates a KV bucket or object store (idempotent for the same settings). Two services creating
 * it at the same moment can get "stream name in use" or "subjects overlap" from the slower
 * create; by then the bucket exists, and a second create opens it.
 */
export async function createBucket<T>(create: () => Promise<T>): Promise<T> {
  try {
    return await create();
  } catch (error) {
    if (!isConcurrentCreate(error)) throw error;
    return create();
  }
}

/**
 * Settings an existing stream must have; the server refuses to change retention, so that is an
 * error. Returns the stream's max_bytes (-1: none).
 */
async function ensureStream(jsm: JetStreamManager, base: StreamSpec, bytes?: StreamBytes): Promise<number> {
  const spec: StreamSpec = bytes?.kind === 'set' ? { ...base, max_bytes: bytes.bytes } : base;
  let existing: StreamConfig | null = null;
  try {
    existing = (await jsm.streams.info(spec.name)).config;
  } catch (error) {
    if (!isJsApiCode(error, JS_CODES.StreamNotFound)) throw toNatsShoalError(error, `read stream ${spec.name}`);
  }
  if (existing === null) {
    try {
      if (bytes?.kind === 'auto') return await createAutoSized(jsm, spec, { shares: bytes.shares, ceiling: bytes.ceiling, streams: bytes.own });
      await jsm.streams.add(spec);
      return spec.max_bytes ?? -1;
    } catch (error) {
      if (bytes?.kind === 'set' && isNoRoom(error)) throw await explicitSizeRefused(jsm, spec, bytes.setting, error);
      // Another service created it a moment ago: fall through and compare.
      if (!isConcurrentCreate(error)) throw toNatsShoalError(error, `create stream ${spec.name}`);
      existing = await jsm.streams.info(spec.name).then(
        (info) => info.config,
        // Not there after all: the subjects overlap another stream of someone else's.
        () => {
          throw toNatsShoalError(error, `create stream ${spec.name}`);
        },
      );
    }
  }
  // A stream sized from the store keeps the size it was given, whatever is free now.
  if (bytes?.kind === 'auto') spec.max_bytes = existing.max_bytes;
  if (existing.retention !== spec.retention) {
    throw new ShoalError(
      ErrorCode.CONFIG_INVALID,
      `stream ${spec.name} exists with retention ${existing.retention}, Shoal needs ${spec.retention}; delete it (nats stream rm ${spec.name}) or use another subject prefix`,
    );
  }
  const sameSubjects = [...existing.subjects].sort().join(' ') === [...spec.subjects].sort().join(' ');
  const limits = { max_age: spec.max_age, duplicate_window: spec.duplicate_window, max_bytes: spec.max_bytes ?? -1, discard: spec.discard };
  const sameLimits = existing.max_age === limits.max_age && existing.duplicate_window === limits.duplicate_window && existing.max_bytes === limits.max_bytes && existing.discard === limits.discard;
  if (sameSubjects && sameLimits) return limits.max_bytes;
  try {
    await jsm.streams.update(spec.name, { ...existing, subjects: spec.subjects, ...limits });
  } catch (error) {
    if (bytes?.kind === 'set' && isNoRoom(error)) throw await explicitSizeRefused(jsm, spec, bytes.setting, error);
    throw toNatsShoalError(error, `update stream ${spec.name}`);
  }
  return limits.max_bytes;
}

/** Which of these streams do not exist yet. */
async function missingStreams(jsm: JetStreamManager, names: readonly string[]): Promise<string[]> {
  const missing: string[] = [];
  for (const name of names) {
    try {
      await jsm.streams.info(name);
    } catch (error) {
      if (!isJsApiCode(error, JS_CODES.StreamNotFound)) throw toNatsShoalError(error, `read stream ${name}`);
      missing.push(name);
    }
  }
  return missing;
}

/** KV and object-store buckets are streams too: their age limit follows the settings. */
async function ensureMaxAge(jsm: JetStreamManager, stream: string, maxAgeNs: number): Promise<void> {
  const info = await jsm.streams.info(stream);
  if (info.config.max_age === maxAgeNs) return;
  await jsm.streams.update(stream, { ...info.config, max_age: maxAgeNs });
}

export interface Topology {
  readonly names: NatsNames;
  readonly settings: TopologySettings;
  readonly jsm: JetStreamManager;
  /** The max_bytes the jobs and results streams have (set, or sized from the server's store). */
  readonly streamBytes: Readonly<{ jobs: number; results: number }>;
}

/** The streams that reserve store (max_bytes), in the order they are created; the ingest stream's name as ingestNames (ingest-store.ts) derives it. */
export function reservingStreams(names: NatsNames): readonly string[] {
  return [names.jobsStream, names.resultsStream, names.jobsStream.replace(/_JOBS$/, '_INGEST')];
}

export async function ensureTopology(nc: NatsConnection, input: TopologySettingsInput | TopologySettings = {}): Promise<Topology> {
  const settings = resolveTopologySettings(input);
  checkReplicatedServer(nc.info?.version, settings.replicas);
  const names = natsNames(settings.prefix);
  const jsm = await jetstreamManager(nc).catch((error: unknown) => {
    throw toNatsShoalError(error, 'JetStream is not available on this NATS server (start it with -js)');
  });
  const storage = settings.storage === 'file' ? StorageType.File : StorageType.Memory;
  const common = { storage, num_replicas: settings.replicas, discard: DiscardPolicy.Old };
  const duplicateWindow = settings.duplicateWindowSeconds * SECOND_NS;
  const advisories = advisoryNames(names);
  const own = reservingStreams(names);
  let streamBytes: Topology['streamBytes'];
  try {
    // One share of the free store per reserving stream still to be made, one kept for the rest.
    const missing = settings.jobsMaxBytes === undefined || settings.resultsMaxBytes === undefined ? await missingStreams(jsm, own) : [];
    const jobsBytes = settings.jobsMaxBytes === undefined
      ? { kind: 'auto' as const, shares: missing.length + 1, ceiling: STREAM_BYTES_CEILING, own }
      : { kind: 'set' as const, bytes: settings.jobsMaxBytes, setting: 'jobsMaxBytes' };
    const jobs = await ensureStream(jsm, {
      ...common,
      name: names.jobsStream,
      subjects: [names.allJobs()],
      retention: RetentionPolicy.Workqueue,
      max_age: settings.jobsMaxAgeSeconds * SECOND_NS,
      // Full: refuse new work (the submitter sees the error) rather than drop queued work.
      discard: DiscardPolicy.New,
      duplicate_window: duplicateWindow,
    }, jobsBytes);
    const stillMissing = missing.filter((name) => name !== names.jobsStream);
    const resultsBytes = settings.resultsMaxBytes === undefined
      // The same size as a jobs stream sized from the store, so the two stay alike.
      ? { kind: 'auto' as const, shares: stillMissing.length + 1, ceiling: settings.jobsMaxBytes === undefined && jobs > 0 ? Math.min(STREAM_BYTES_CEILING, jobs) : STREAM_BYTES_CEILING, own }
      : { kind: 'set' as const, bytes: settings.resultsMaxBytes, setting: 'resultsMaxBytes' };
    const results = await ensureStream(jsm, {
      ...common,
      name: names.resultsStream,
      subjects: [names.allResults()],
      retention: RetentionPolicy.Limits,
      max_age: settings.resultsMaxAgeSeconds * SECOND_NS,
      duplicate_window: duplicateWindow,
    }, resultsBytes);
    streamBytes = Object.freeze({ jobs, results });
    await ensureStream(jsm, {
      ...common,
      name: names.deadLetterStream,
      subjects: [names.allDeadLetters()],
      retention: RetentionPolicy.Limits,
      max_age: settings.deadLetterMaxAgeSeconds * SECOND_NS,
      duplicate_window: Math.min(duplicateWindow, settings.deadLetterMaxAgeSeconds * SECOND_NS),
    });
    await ensureStream(jsm, {
      ...common,
      name: advisories.stream,
      subjects: [advisories.subject],
      retention: RetentionPolicy.Workqueue,
      max_age: settings.deadLetterMaxAgeSeconds * SECOND_NS,
      duplicate_window: 60 * SECOND_NS,
    });
    await ensureConsumer(jsm, advisories.stream, {
      durable_name: advisories.consumer,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: 30 * SECOND_NS,
      max_deliver: -1,
    });
    const kvm = new Kvm(nc);
    await createBucket(() => kvm.create(names.statusBucket, { history: 1, ttl: settings.statusMaxAgeSeconds * 1000, storage, replicas: settings.replicas }));
    await ensureMaxAge(jsm, `KV_${names.statusBucket}`, settings.statusMaxAgeSeconds * SECOND_NS);
    const objm = new Objm(nc);
    await createBucket(() => objm.create(names.payloadBucket, { ttl: settings.payloadMaxAgeSeconds * SECOND_NS, storage, replicas: settings.replicas }));
    await ensureMaxAge(jsm, `OBJ_${names.payloadBucket}`, settings.payloadMaxAgeSeconds * SECOND_NS);
  } catch (error) {
    const refusal = replicasRefusal(error);
    if (refusal !== null) {
      throw new ShoalError(
        ErrorCode.CONFIG_INVALID,
        `NATS JetStream cannot place ${settings.replicas} replicas of Shoal's streams (${refusal}): the topology setting replicas (SHOAL_STREAM_REPLICAS) must not exceed the number of JetStream servers in the cluster (all of them up), and is 1 on a server that is not clustered`,
        { cause: error, details: { replicas: settings.replicas } },
      );
    }
    throw toNatsShoalError(error, 'set up the NATS topology');
  }
  return Object.freeze({ names, settings, jsm, streamBytes });
}

interface ConsumerSpec {
  durable_name: string;
  filter_subject?: string;
  ack_policy: AckPolicy;
  deliver_policy: DeliverPolicy;
  ack_wait: number;
  max_deliver: number;
  max_ack_pending?: number;
}

async function ensureConsumer(jsm: JetStreamManager, stream: string, spec: ConsumerSpec, createOnly = false): Promise<void> {
  try {
    const info = await jsm.consumers.info(stream, spec.durable_name);
    if (createOnly) return;
    const c = info.config;
    const same = c.ack_wait === spec.ack_wait && c.max_deliver === spec.max_deliver && (spec.max_ack_pending === undefined || c.max_ack_pending === spec.max_ack_pending);
    if (same) return;
    const update: { ack_wait: number; max_deliver: number; max_ack_pending?: number } = { ack_wait: spec.ack_wait, max_deliver: spec.max_deliver };
    if (spec.max_ack_pending !== undefined) update.max_ack_pending = spec.max_ack_pending;
    await jsm.consumers.update(stream, spec.durable_name, update);
    return;
  } catch (error) {
    if (!isJsApiCode(error, JS_CODES.ConsumerNotFound)) throw toNatsShoalError(error, `read consumer ${spec.durable_name}`);
  }
  try {
    // Adding an identical durable consumer is a no-op on the server, so a concurrent add is harmless.
    await jsm.consumers.add(stream, spec);
  } catch (error) {
    throw toNatsShoalError(error, `create consumer ${spec.durable_name} on ${stream}`);
  }
}

/**
 * The durable consumer of a results sink on the results stream (every job's results, from the
 * first message kept): created when missing; several sink processes with the same name share it.
 */
export async function ensureSinkConsumer(topology: Topology, durableName: string): Promise<void> {
  await ensureConsumer(topology.jsm, topology.names.resultsStream, {
    durable_name: durableName,
    filter_subject: topology.names.allResults(),
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: 60 * SECOND_NS,
    max_deliver: -1,
  });
}

/**
 * The durable pull consumer of one primitive and model: created when missing; its limits updated
 * to `input` unless `createOnly` (clients create it for KEDA, but the workers own its settings).
 */
export async function ensureJobConsumer(
  topology: Topology,
  primitive: Primitive,
  model: string,
  input: ConsumerSettingsInput | ConsumerSettings = {},
  createOnly = false,
): Promise<string> {
  const settings = resolveConsumerSettings(input);
  const name = topology.names.consumer(primitive, model);
  await ensureConsumer(topology.jsm, topology.names.jobsStream, {
    durable_name: name,
    filter_subject: topology.names.jobs(primitive, model),
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: settings.ackWaitMs * 1_000_000,
    max_deliver: settings.maxDeliver,
    max_ack_pending: settings.maxAckPending,
  }, createOnly);
  return name;
}
