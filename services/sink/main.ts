import { jetstream } from '@nats-io/jetstream';
import { connectNats, type NatsConnectionSettingsInput } from '../../adapters/nats/connection.js';
import { PayloadStore } from '../../adapters/nats/payloads.js';
import { ResultSink, type IndexTarget, type ResultSinkOptions } from '../../adapters/nats/result-sink.js';
import { StatusStore } from '../../adapters/nats/status-store.js';
import { ensureTopology } from '../../adapters/nats/topology.js';
import type { S3SettingsInput } from '../../adapters/object-store/index.js';
import type { Logger } from '../../adapters/observability/logger.js';
import type { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { ResultIndexWriter } from '../../adapters/nats/result-index.js';
import { openSink, type SinkCredentials } from '../../adapters/sinks/open.js';
import type { Lifecycle } from '../../adapters/protocol/lifecycle.js';
import { envValue, SETTINGS } from '../settings/table.js';

/**
 * Composition root of the results sink (`shoal sink`, and the one `shoal dev` runs): its own
 * NATS connection, the topology, and a ResultSink writing every job's results into `dir`, or
 * into a vector store when `index` names one (any `--index` URI of adapters/sinks/open.ts).
 */

/**
 * One write's own retries stay short: while the store is down the message goes back to the stream
 * (nak with a delay) and the job shows `degraded`, rather than one handler blocking for a minute.
 */
const INDEX_WRITE_RETRY_MS = 2_000;

/** Where results land when nothing else is configured (SHOAL_RESULTS_DIR, --results-dir). */
export const DEFAULT_RESULTS_DIR = SETTINGS.resultsDir.default;

/** The results folder: the flag, else SHOAL_RESULTS_DIR (when not blank), else the default. */
export function resultsDirFrom(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  return flag ?? envValue(env, 'resultsDir') ?? DEFAULT_RESULTS_DIR;
}

export interface SinkSettings {
  nats: NatsConnectionSettingsInput;
  prefix?: string | undefined;
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
  credentials?: SinkCredentials | undefined;
  /** Records shoal_sink_degraded and the write metrics. @default none */
  metrics?: ShoalMetrics | undefined;
  /** Pause before a failed index write is tried again. @default 5000 */
  storeRetryMs?: number;
}

export interface SinkHandle extends Lifecycle {
  /** The folder, or the index URI without its password. */
  readonly dir: string;
}

export async function startSink(settings: SinkSettings): Promise<SinkHandle> {
  const nc = await connectNats(settings.nats, { ...(settings.logger === undefined ? {} : { logger: settings.logger }), name: 'shoal sink' });
  try {
    const topology = await ensureTopology(nc, settings.prefix === undefined ? {} : { prefix: settings.prefix });
    const payloads = new PayloadStore(nc, { bucket: topology.names.payloadBucket, ...(settings.s3 === undefined ? {} : { s3: settings.s3 }) });
    // Results are checked against their job's status before they are written (forged results are refused).
    const status = await StatusStore.open(nc, topology.names.statusBucket);
    const target = (uri: string, table: string | undefined): IndexTarget => {
      const opened = openSink(uri, {
        table,
        ...(settings.credentials === undefined ? {} : { credentials: settings.credentials }),
        ...(settings.s3 === undefined ? {} : { s3: settings.s3 }),
        ...(settings.metrics === undefined ? {} : { observer: settings.metrics.sinkObserver }),
        retry: { maxElapsedMs: INDEX_WRITE_RETRY_MS },
      });
      settings.metrics?.sinkDegraded.set({ backend: opened.backend }, 0);
      return { writer: new ResultIndexWriter(opened.sink), display: opened.display, backend: opened.backend };
    };
    const index = settings.index === undefined ? undefined : target(settings.index.uri, settings.index.table);
    const indexes = new Map(Object.entries(settings.indexes ?? {}).map(([name, uri]) => [name, target(uri, undefined)] as const));
    // The gauge is 1 while any store of that backend is failing.
    const failing = new Set<IndexTarget>();
    const onStoreHealth = (changed: IndexTarget, healthy: boolean): void => {
      if (healthy) failing.delete(changed);
      else failing.add(changed);
      const down = [...failing].some((t) => t.backend === changed.backend);
      settings.metrics?.sinkDegraded.set({ backend: changed.backend }, down ? 1 : 0);
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
    const where = index === undefined ? sink.dir : index.display;
    settings.logger?.info({ into: where, consumer: sink.durableName }, 'results sink started');
    // Stops after the batch in hand (written and acked), then flushes and closes the connection.
    const drain = async (): Promise<void> => {
      await sink.drain();
      await nc.drain().catch(() => undefined);
    };
    return { dir: where, drain, close: drain };
  } catch (error) {
    await nc.close().catch(() => undefined);
    throw error;
  }
}
