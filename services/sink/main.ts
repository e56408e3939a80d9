import { jetstream } from '@nats-io/jetstream';
import { connectNats, type NatsConnectionSettingsInput } from '../../adapters/nats/connection.js';
import { PayloadStore } from '../../adapters/nats/payloads.js';
import { ResultSink, type ResultSinkOptions } from '../../adapters/nats/result-sink.js';
import { ensureTopology } from '../../adapters/nats/topology.js';
import type { Logger } from '../../adapters/observability/logger.js';

/**
 * Composition root of the results sink (`shoal sink`, and the one `shoal dev` runs): its own
 * NATS connection, the topology, and a ResultSink writing every job's results into `dir`.
 */

/** Where results land when nothing else is configured (SHOAL_RESULTS_DIR, --results-dir). */
export const DEFAULT_RESULTS_DIR = 'shoal-results';

/** The results folder: the flag, else SHOAL_RESULTS_DIR (when not blank), else the default. */
export function resultsDirFrom(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  const fromEnv = env.SHOAL_RESULTS_DIR?.trim();
  return flag ?? (fromEnv === undefined || fromEnv === '' ? DEFAULT_RESULTS_DIR : fromEnv);
}

export interface SinkSettings {
  nats: NatsConnectionSettingsInput;
  prefix?: string | undefined;
  dir: string;
  logger?: Logger;
  onWritten?: ResultSinkOptions['onWritten'];
}

export interface SinkHandle {
  readonly dir: string;
  /** Stops after the batch in hand and closes the connection. */
  stop(): Promise<void>;
}

export async function startSink(settings: SinkSettings): Promise<SinkHandle> {
  const nc = await connectNats(settings.nats, { ...(settings.logger === undefined ? {} : { logger: settings.logger }), name: 'shoal sink' });
  try {
    const topology = await ensureTopology(nc, settings.prefix === undefined ? {} : { prefix: settings.prefix });
    const payloads = new PayloadStore(nc, { bucket: topology.names.payloadBucket });
    const sink = new ResultSink({
      js: jetstream(nc),
      topology,
      payloads,
      dir: settings.dir,
      ...(settings.logger === undefined ? {} : { logger: settings.logger }),
      ...(settings.onWritten === undefined ? {} : { onWritten: settings.onWritten }),
    });
    await sink.start();
    settings.logger?.info({ dir: sink.dir, consumer: sink.durableName }, 'results sink started');
    return {
      dir: sink.dir,
      stop: async () => {
        await sink.stop();
        await nc.drain().catch(() => undefined);
      },
    };
  } catch (error) {
    await nc.close().catch(() => undefined);
    throw error;
  }
}
