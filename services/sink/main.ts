import type { ShoalSettings } from '../settings/shoal-settings.js';
import { jetstream } from '@nats-io/jetstream';
import { connectNats, type NatsConnectionSettingsInput } from '../../adapters/nats/connection/connection.js';
import { PayloadStore } from '../../adapters/nats/connection/payloads.js';
import { ResultSink, type IndexTarget, type ResultSinkOptions } from '../../adapters/nats/results/result-sink.js';
import { StatusStore } from '../../adapters/nats/jobs/status-store.js';
import { ensureTopology } from '../../adapters/nats/connection/topology.js';
import type { S3SettingsInput } from '../../adapters/object-store/index.js';
import type { Logger } from '../../adapters/observability/logger.js';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { ResultIndexWriter } from '../../adapters/nats/results/result-index.js';
import { openStore, parseIndexRef, type StoreCredentials } from '../../adapters/stores/open.js';
import type { Lifecycle } from '../../adapters/protocol/lifecycle.js';
import { SETTINGS } from '../settings/table.js';
import { startMetricsServer } from '../../adapters/observability/metrics-server.js';
import { LOOPBACK_HOST } from '../../adapters/observability/bind-address.js';

/**
 * Composition root of the results sink (`shoal sink`, and the one `shoal dev` runs): its own
 * NATS connection, the topology, and a ResultSink writing every job's results into `dir`, or
 * into a vector store when `index` names one (any `--index` URI of adapters/stores/open.ts).
 */

/**
 * One write's own retries stay short: while the store is down the message goes back to the stream
 * (nak with a delay) and the job shows `degraded`, rather than one handler blocking for a minute.
 */
const INDEX_WRITE_RETRY_MS = 2_000;

/**
 * Address of the sink's metrics port unless --metrics-host / SHOAL_METRICS_HOST says otherwise:
 * loopback, since a sink usually runs beside its store rather than behind a scraper (the Helm
 * chart sets 0.0.0.0 for its pod).
 */
export const SINK_METRICS_HOST = LOOPBACK_HOST;

/** Where results land when nothing else is configured (SHOAL_RESULTS_DIR, --results-dir). */
export const DEFAULT_RESULTS_DIR = SETTINGS.resultsDir.default;

/** The results folder: the flag, else SHOAL_RESULTS_DIR (when not blank), else the default. */
export function resultsDirFrom(flag: string | undefined, settings: ShoalSettings): string {
  return flag ?? settings.value('resultsDir') ?? DEFAULT_RESULTS_DIR;
}

export interface SinkSettings {
  nats: NatsConnectionSettingsInput;
  prefix?: string | undefined;
  /** Replicas of the streams, KV buckets and object store created when missing (SHOAL_STREAM_REPLICAS). @default 1 */
  replicas?: number | undefined;
  dir: string;
  logger?: Logger;
  onWritten?: ResultSinkOptions['onWritten'];
  /** S3 settings for results stored by reference under `s3://` targets. @default the SDK's defaults */
  s3?: S3SettingsInput;
  /** Write encode results into this vector store instead of `dir` (`shoal sink --index`). */
  index?: { uri: string; table?: string | undefined } | undefined;
  /** Named indexes (SHOAL_INDEXES `name=URI`) for jobs with an `{kind: "index", index: name}` target. @default none */
  indexes?: Readonly<Record<string, string>> | undefined;
  /** Credentials of the stores (PGPASSWORD, CHROMA_API_KEY...; never logged). */
  credentials?: StoreCredentials | undefined;
  /** Records shoal_sink_degraded and the write metrics. @default one of its own when metricsPort is set, else none */
  metrics?: ShoalMetrics | undefined;
  /** Serve /metrics, /healthz and /readyz on this port (0: a free one). @default off */
  metricsPort?: number | null | undefined;
  /** @default SINK_METRICS_HOST */
  metricsHost?: string | undefined;
  /** Pause before a failed index write is tried again. @default 5000 */
  storeRetryMs?: number;
  /** Stops a connection to NATS still being attempted (the first SIGTERM/Ctrl-C). @default none */
  signal?: AbortSignal;
}

export interface SinkHandle extends Lifecycle {
  /** The folder, or the index URI without its password. */
  readonly dir: string;
  /** `http://host:port` of /metrics, null when no metrics port was asked for. */
  readonly metricsUrl: string | null;
}

export async function startSink(settings: SinkSettings): Promise<SinkHandle> {
  const port = settings.metricsPort ?? null;
  const metrics = settings.metrics ?? (port === null ? undefined : new ShoalMetrics({ defaultLabels: { service: 'sink' } }));
  let taking = false;
  // Opened before NATS: /healthz answers while the sink connects, /readyz once it takes results.
  const server =
    port === null || metrics === undefined
      ? null
      : await startMetricsServer({ metrics, host: settings.metricsHost ?? SINK_METRICS_HOST, port, ready: () => taking, service: 'sink', ...(settings.logger === undefined ? {} : { logger: settings.logger }) });
  if (server !== null) settings.logger?.info({ url: server.url }, 'sink metrics: /metrics, /healthz, /readyz');
  // The index URIs are checked before NATS (parsing connects to nothing): a mistyped --index is
  // refused at once instead of after a connection that may be retried for a long time.
  let index: IndexTarget | undefined;
  let indexes: Map<string, IndexTarget>;
  let nc: Awaited<ReturnType<typeof connectNats>>;
  try {
    const target = (uri: string, table: string | undefined): IndexTarget => {
      const ref = parseIndexRef(uri, {
        table,
        ...(settings.credentials === undefined ? {} : { credentials: settings.credentials }),
        ...(settings.s3 === undefined ? {} : { s3: settings.s3 }),
      });
      const opened = openStore(ref, {
        ...(metrics === undefined ? {} : { observer: metrics.sinkObserver }),
        retry: { maxElapsedMs: INDEX_WRITE_RETRY_MS },
      });
      metrics?.sinkDegraded.set({ backend: opened.backend }, 0);
      return { writer: new ResultIndexWriter(opened.store), display: opened.display, backend: opened.backend };
    };
    index = settings.index === undefined ? undefined : target(settings.index.uri, settings.index.table);
    indexes = new Map(Object.entries(settings.indexes ?? {}).map(([name, uri]) => [name, target(uri, undefined)] as const));
    nc = await connectNats(settings.nats, { ...(settings.logger === undefined ? {} : { logger: settings.logger }), name: 'shoal sink', ...(settings.signal === undefined ? {} : { signal: settings.signal }) });
  } catch (error) {
    await server?.close();
    throw error;
  }
  try {
    const topology = await ensureTopology(nc, {
      ...(settings.prefix === undefined ? {} : { prefix: settings.prefix }),
      ...(settings.replicas === undefined ? {} : { replicas: settings.replicas }),
    });
    const payloads = new PayloadStore(nc, { bucket: topology.names.payloadBucket, ...(settings.s3 === undefined ? {} : { s3: settings.s3 }) });
    // Results are checked against their job's status before they are written (forged results are refused).
    const status = await StatusStore.open(nc, topology.names.statusBucket);
    // The gauge is 1 while any store of that backend is failing.
    const failing = new Set<IndexTarget>();
    const onStoreHealth = (changed: IndexTarget, healthy: boolean): void => {
      if (healthy) failing.delete(changed);
      else failing.add(changed);
      const down = [...failing].some((t) => t.backend === changed.backend);
      metrics?.sinkDegraded.set({ backend: changed.backend }, down ? 1 : 0);
    };
    const sink = new ResultSink({
      js: jetstream(nc),
      topology,
      payloads,
      status,
      dir: settings.dir,
      ...(settings.logger === undefined ? {} : { logger: settings.logger }),
      ...(settings.onWritten === undefined ? {} : { onWritten: settings.onWritten }),
      ...(index === undefined ? {} : { index }),
      indexes,
      onStoreHealth,
      ...(settings.storeRetryMs === undefined ? {} : { storeRetryMs: settings.storeRetryMs }),
    });
    await sink.start();
    taking = true;
    const where = index === undefined ? sink.dir : index.display;
    settings.logger?.info({ into: where, consumer: sink.durableName }, 'results sink started');
    // Stops after the batch in hand (written and acked), then flushes and closes the connection.
    let drained: Promise<void> | null = null;
    const drain = (): Promise<void> => {
      drained ??= (async () => {
        taking = false;
        try {
          await sink.drain();
          await nc.drain().catch(() => undefined);
        } finally {
          await server?.close();
        }
      })();
      return drained;
    };
    return { dir: where, metricsUrl: server?.url ?? null, drain, close: drain };
  } catch (error) {
    await nc.close().catch(() => undefined);
    await server?.close();
    throw error;
  }
}
