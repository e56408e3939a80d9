import type { Command } from 'commander';
import { z } from 'zod';
import type { GatewayConfig } from '../../gateway/config.js';
import { DEFAULT_BODY_LIMIT, DEFAULT_DRAIN_DELAY_MS, DEFAULT_GATEWAY_HOST, DEFAULT_GATEWAY_PORT, DEFAULT_REQUEST_TIMEOUT_MS, DEFAULT_SHUTDOWN_TIMEOUT_MS } from '../../gateway/defaults.js';
import { SETTINGS } from '../../settings/table.js';
import type { CliApp } from '../app.js';
import { parseFlags } from '../line-options.js';

/**
 * `shoal gateway`: the HTTP API in front of NATS workers (docs/http.md).
 * Runs until SIGINT/SIGTERM, then stops accepting, lets in-flight requests finish and exits 0.
 * The flags are shared with `shoal dev`, which runs the same gateway next to its own worker.
 */

const GatewayFlagValues = z.looseObject({
  host: z.string().optional(),
  port: z.string().optional(),
  apiTokensFile: z.string().optional(),
  metricsAuth: z.boolean().optional(),
  bodyLimit: z.string().optional(),
  requestTimeoutMs: z.string().optional(),
  shutdownTimeoutMs: z.string().optional(),
  drainDelayMs: z.string().optional(),
  nats: z.string().optional(),
  natsCreds: z.string().optional(),
  prefix: z.string().optional(),
  corsOrigins: z.string().optional(),
  embedModel: z.string().optional(),
  rerankModel: z.string().optional(),
  sparseModel: z.string().optional(),
  maxInflightItems: z.string().optional(),
  maxQueueSeconds: z.string().optional(),
});

const EXAMPLE = `
Environment (flags win): SHOAL_HOST, SHOAL_PORT, SHOAL_API_TOKENS (comma-separated) or
SHOAL_API_TOKENS_FILE, SHOAL_METRICS_AUTH=1, SHOAL_BODY_LIMIT, SHOAL_REQUEST_TIMEOUT_MS,
SHOAL_SHUTDOWN_TIMEOUT_MS, SHOAL_CORS_ORIGINS, SHOAL_EMBED_MODEL, SHOAL_RERANK_MODEL, SHOAL_SPARSE_MODEL,
SHOAL_SUBJECT_PREFIX, SHOAL_STREAM_REPLICAS; NATS_URL, NATS_CREDS, NATS_USER/NATS_PASSWORD, NATS_TOKEN, NATS_TLS_CA/CERT/KEY.

Examples:
  $ shoal gateway --nats nats://nats:4222 --embed-model BAAI/bge-small-en-v1.5
  $ curl -s localhost:8080/v1/encode -H 'content-type: application/json' \\
      -d '{"model": "BAAI/bge-small-en-v1.5", "items": ["hello"]}'`;

/** Declares the gateway's flags on `command` (shoal gateway and shoal dev). */
export function addGatewayOptions(command: Command, defaults: { host: string }): Command {
  return command
    .option('--host <host>', `address to listen on (env SHOAL_HOST; default ${defaults.host})`)
    .option('--port <n>', `HTTP port, 0 for any free one (env SHOAL_PORT; default ${DEFAULT_GATEWAY_PORT})`)
    .option('--api-tokens-file <file>', 'require a bearer token: accepted tokens, one per line (or env SHOAL_API_TOKENS=a,b)')
    .option('--metrics-auth', 'require the token on /metrics too (default: /metrics is open)')
    .option('--body-limit <size>', `largest request body, e.g. 8MiB (env SHOAL_BODY_LIMIT; default ${DEFAULT_BODY_LIMIT})`)
    .option('--request-timeout-ms <n>', `longest synchronous call (env SHOAL_REQUEST_TIMEOUT_MS; default ${DEFAULT_REQUEST_TIMEOUT_MS})`)
    .option('--shutdown-timeout-ms <n>', `how long in-flight requests may finish after SIGTERM (env SHOAL_SHUTDOWN_TIMEOUT_MS; default ${DEFAULT_SHUTDOWN_TIMEOUT_MS})`)
    .option('--drain-delay-ms <n>', `after SIGTERM, keep serving this long with /readyz at 503 before the port closes (env SHOAL_DRAIN_DELAY_MS; default ${DEFAULT_DRAIN_DELAY_MS})`)
    .option('--cors-origins <list>', 'browser origins allowed cross-origin, comma-separated, or * (env SHOAL_CORS_ORIGINS; default: CORS off)')
    .option('--embed-model <model>', 'model of the TEI-compatible /embed route (env SHOAL_EMBED_MODEL)')
    .option('--rerank-model <model>', 'model of the TEI-compatible /rerank route (env SHOAL_RERANK_MODEL)')
    .option('--sparse-model <model>', 'sparse (SPLADE) model of the TEI-compatible /embed_sparse route (env SHOAL_SPARSE_MODEL; default: the embed model)')
    .option('--prefix <prefix>', 'NATS subject prefix shared with the workers (env SHOAL_SUBJECT_PREFIX; default shoal)')
    .option('--max-inflight-items <n>', `items of synchronous calls in flight per model before 429 (env SHOAL_MAX_INFLIGHT_ITEMS; default ${SETTINGS.maxInFlightItems.default})`)
    .option('--max-queue-seconds <n>', `seconds of queued work per model before 429 (env SHOAL_MAX_QUEUE_SECONDS; default ${SETTINGS.maxQueueSeconds.default})`);
}

/**
 * The gateway configuration from this command's flags and the environment. The gateway's modules
 * (fastify, the NATS client) are loaded here, on use, so other commands start without them.
 */
export async function gatewayConfig(command: Command, app: CliApp, overrides: { host?: string } = {}): Promise<GatewayConfig> {
  const flags = parseFlags(GatewayFlagValues, command);
  const { resolveGatewayConfig } = await import('../../gateway/config.js');
  // Precedence: flag, then SHOAL_HOST, then the command's own default.
  const host = flags.host ?? (app.settings.value('host') === undefined ? overrides.host : undefined);
  const { nats, prefix, ...rest } = flags;
  return resolveGatewayConfig({ ...rest, host, natsUrl: nats, natsPrefix: prefix }, app.settings);
}

/** Resolves once the CLI's interrupt signal (SIGINT/SIGTERM) fires. */
export function interrupted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

export function registerGateway(program: Command, app: CliApp): void {
  const command = program
    .command('gateway')
    .summary('HTTP API (encode, score, extract, jobs, OpenAI and TEI compatible) in front of NATS workers')
    .description('Serve the HTTP API; requests go to `shoal worker` processes over NATS. Stops cleanly on SIGINT/SIGTERM.');
  addGatewayOptions(command, { host: DEFAULT_GATEWAY_HOST })
    .option('--nats <urls>', 'NATS servers, comma-separated (env NATS_URL; default nats://127.0.0.1:4222)')
    .option('--nats-creds <file>', 'NATS credentials file (env NATS_CREDS)')
    .addHelpText('after', EXAMPLE)
    .action(async (_options: unknown, self: Command) => {
      const config = await gatewayConfig(self, app);
      const { listeningLine, startGateway } = await import('../../gateway/main.js');
      const gateway = await startGateway({ config, signal: app.io.signal });
      if (!app.config(self).quiet) app.io.stderr.write(`shoal gateway listening on ${listeningLine(gateway.url, config.host)} (Ctrl-C to stop)\n`);
      await interrupted(app.io.signal);
      await gateway.close();
    });
}

