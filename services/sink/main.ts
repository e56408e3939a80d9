import { jetstream } from '@nats-io/jetstream';
import { connectNats, type NatsConnectionSettingsInput } from '../../adapters/nats/connection.js';
import { PayloadStore } from '../../adapters/nats/payloads.js';
import { ResultSink, type ResultSinkOptions } from '../../adapters/nats/result-sink.js';
import { StatusStore } from '../../adapters/nats/status-store.js';
import { ensureTopology } from '../../adapters/nats/topology.js';
import type { S3SettingsInput } from '../../adapters/object-store/index.js';
import type { Logger } from '../../adapters/observability/logger.js';
import type { Lifecycle } from '../../adapters/protocol/lifecycle.js';
import { envValue, SETTINGS } from '../settings/table.js';

/**
 * Composition root of the results sink (`shoal sink`, and the one `shoal dev` runs): its own
 * NATS connection, the topology, and a ResultSink writing every job's results into `dir`.
 */

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
}

export interface SinkHandle extends Lifecycle {
  readonly dir: string;
}

export async function startSink(settings: SinkSettings): Promise<SinkHandle> {
  const nc = await connectNats(settings.nats, { ...(settings.logger === undefined ? {} : { logger: settings.logger }), name: 'shoal sink' });
  try {
    const topology = await ensureTopology(nc, settings.prefix === undefined ? {} : { prefix: settings.prefix });
    const payloads = new PayloadStore(nc, { bucket: topology.names.payloadBucket, ...(settings.s3 === undefined ? {} : { s3: settings.s3 }) });
    // Results are checked against their job's status before they are written (forged results are refused).
    const status = await StatusStore.open(nc, topology.names.statusBucket);
    const sink = new ResultSink({
      js: jetstream(nc),
      topology,
      payloads,
      status,
      dir: settings.dir,
      ...(settings.logger === undefined ? {} : { logger: settings.logger }),
      ...(settings.onWritten === undefined ? {} : { onWritten: settings.onWritten }),
    });
    await sink.start();
    settings.logger?.info({ dir: sink.dir, consumer: sink.durableName }, 'results sink started');
    // Stops after the batch in hand (written and acked), then flushes and closes the connection.
    const drain = async (): Promise<void> => {
      await sink.drain();
      await nc.drain().catch(() => undefined);
    };
    return { dir: sink.dir, drain, close: drain };
  } catch (error) {
    await nc.close().catch(() => undefined);
    throw error;
  }
}
