import { ShoalSettings } from '../settings/shoal-settings.js';
import { pathToFileURL } from 'node:url';
import { createLogger, type Logger } from '../../adapters/observability/logger.js';
import { logUnhandledRejections } from '../../adapters/observability/unhandled-rejections.js';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { ErrorCode, hasErrorCode, toShoalError } from '../../adapters/protocol/errors.js';
import { parseWorkerConfig, workerConfigFromEnv, type WorkerConfig } from './config.js';
import { startMetricsServer } from '../../adapters/observability/metrics-server.js';
import { ShoalWorker, type WorkerDeps } from './worker.js';

/**
 * Composition root of the worker: runs a ShoalWorker until `signal` aborts, then drains it within
 * the configured deadline. `shoal worker` (services/cli) calls runWorker with its own signal; run
 * directly (`node --import tsx services/worker/main.ts`, containers), this file reads the
 * configuration from the environment and turns SIGTERM/SIGINT into that signal. A second signal
 * during the drain stops at once (in-flight parts are nak'ed, never lost).
 */

export interface RunWorkerOptions extends WorkerDeps {
  signal: AbortSignal;
  /** Called once the worker takes work (tests, readiness). */
  onReady?: (worker: ShoalWorker) => void;
}

export async function runWorker(config: WorkerConfig, options: RunWorkerOptions): Promise<void> {
  // The metrics port opens first: /healthz answers while models preload, /readyz once work is taken.
  const metrics = options.metrics ?? (config.metricsPort === null ? undefined : new ShoalMetrics({ defaultLabels: { service: 'worker', worker: config.workerId } }));
  let worker: ShoalWorker | null = null;
  const server =
    config.metricsPort === null || metrics === undefined
      ? null
      : await startMetricsServer({ metrics, host: config.metricsHost, port: config.metricsPort, ready: () => worker?.state === 'running', ...(options.logger === undefined ? {} : { logger: options.logger }) });
  if (server !== null) options.logger?.info({ url: server.url }, 'worker metrics: /metrics, /healthz, /readyz');
  try {
    try {
      worker = await ShoalWorker.start(config, { ...options, ...(metrics === undefined ? {} : { metrics }) });
    } catch (error) {
      // Stopped before it ever started (still connecting, still loading): a clean stop, not a failure.
      if (options.signal.aborted && hasErrorCode(error, ErrorCode.CANCELLED)) return;
      throw error;
    }
    options.onReady?.(worker);
    if (!options.signal.aborted) {
      await new Promise<void>((resolve) => options.signal.addEventListener('abort', () => resolve(), { once: true }));
    }
    await worker.drain();
  } finally {
    await server?.close();
  }
}

function installSignals(logger: Logger, onSecond: () => void): AbortSignal {
  const controller = new AbortController();
  const onSignal = (signal: NodeJS.Signals): void => {
    if (!controller.signal.aborted) {
      logger.info({ signal }, 'stopping: draining in-flight work');
      controller.abort();
      return;
    }
    logger.warn({ signal }, 'second signal: stopping now');
    onSecond();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  return controller.signal;
}

async function main(): Promise<number> {
  const logger = createLogger('worker');
  logUnhandledRejections(logger);
  let worker: ShoalWorker | null = null;
  const signal = installSignals(logger, () => void worker?.close());
  try {
    // The process's settings, once: the settings file beneath the variables.
    const settings = ShoalSettings.load(process.argv.slice(2), process.env);
    const config = parseWorkerConfig(workerConfigFromEnv(settings));
    await runWorker(config, { signal, logger, settings, onReady: (w) => (worker = w) });
    return 0;
  } catch (error) {
    const shoal = toShoalError(error);
    logger.fatal({ code: shoal.code, err: shoal.message }, 'worker failed');
    return 1;
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exit(await main());
}
