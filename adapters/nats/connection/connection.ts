import { readFile } from 'node:fs/promises';
import { connect, credsAuthenticator, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';
import type { Logger } from '../../observability/logger.js';
import { ErrorCode, hasErrorCode, ShoalError } from '../../protocol/errors.js';
import { pause } from '../../support/abortable.js';
import { parseWith } from '../../protocol/validate.js';
import { hideUserInfo } from '../../protocol/uri-credentials.js';
import { toNatsShoalError } from './nats-errors.js';

/**
 * One way to connect to NATS for every service: servers and credentials (user/password, token,
 * creds file, TLS files) from configuration, reconnecting forever with exponential backoff (a
 * broker restart must never end a worker), and connection state changes written to the log.
 */

export const DEFAULT_NATS_URL = 'nats://127.0.0.1:4222';

export const NatsTlsSettings = z.strictObject({
  /** CA bundle that signed the server certificate. */
  caFile: z.string().min(1).optional(),
  /** Client certificate and key, for servers that verify clients (mTLS). */
  certFile: z.string().min(1).optional(),
  keyFile: z.string().min(1).optional(),
});

export const NatsConnectionSettings = z
  .strictObject({
    /** Server URLs (`nats://host:4222`, `tls://host:4222`). @default ['nats://127.0.0.1:4222'] */
    servers: z.array(z.string().min(1)).min(1).default([DEFAULT_NATS_URL]),
    /** Connection name shown by the server (`/connz`). */
    name: z.string().min(1).optional(),
    user: z.string().min(1).optional(),
    pass: z.string().optional(),
    token: z.string().min(1).optional(),
    /** A `.creds` file (JWT + NKey seed) of an operator-mode account. */
    credsFile: z.string().min(1).optional(),
    tls: NatsTlsSettings.optional(),
    /** First wait between reconnect rounds; doubles up to reconnectMaxWaitMs. @default 250 */
    reconnectWaitMs: z.number().int().min(10).max(60_000).default(250),
    /** @default 5000 */
    reconnectMaxWaitMs: z.number().int().min(10).max(300_000).default(5_000),
    /** Keep trying when the first connection fails (services); false fails at once (CLI). @default true */
    retryFirstConnect: z.boolean().default(true),
    /** Timeout of one connection attempt. @default 5000 */
    connectTimeoutMs: z.number().int().min(100).max(120_000).default(5_000),
  })
  .refine((s) => (s.user === undefined) === (s.pass === undefined), 'user and pass go together')
  .refine(
    (s) => [s.user !== undefined, s.token !== undefined, s.credsFile !== undefined].filter(Boolean).length <= 1,
    'give one of user/pass, token or credsFile',
  );
export type NatsConnectionSettings = z.output<typeof NatsConnectionSettings>;
export type NatsConnectionSettingsInput = z.input<typeof NatsConnectionSettings>;

export function resolveNatsSettings(input: NatsConnectionSettingsInput = {}): NatsConnectionSettings {
  return Object.freeze(parseWith(NatsConnectionSettings, input, 'NATS connection settings', ErrorCode.CONFIG_INVALID));
}

async function readCreds(path: string): Promise<Uint8Array> {
  try {
    return await readFile(path);
  } catch (error) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `cannot read the NATS creds file ${path}: ${String(error)}`, { cause: error });
  }
}

/** Exponential backoff between reconnect rounds, back to the start after each successful reconnect. */
class ReconnectBackoff {
  #attempt = 0;
  constructor(
    private readonly firstMs: number,
    private readonly maxMs: number,
  ) {}
  next(): number {
    const base = Math.min(this.maxMs, this.firstMs * 2 ** Math.min(this.#attempt, 20));
    this.#attempt++;
    // Jitter spreads the reconnects of many workers after a broker restart.
    return Math.round(base * (0.75 + Math.random() * 0.5));
  }
  reset(): void {
    this.#attempt = 0;
  }
}

export interface ConnectNatsOptions {
  logger?: Logger;
  /** Overrides settings.name. */
  name?: string;
  /** Stops a first connection still being retried (SIGTERM, Ctrl-C): rejects with CANCELLED. */
  signal?: AbortSignal;
  /** Told of each failed first-connection attempt (the gateway's /readyz says why it is not ready). */
  onAttemptFailed?: (failure: ShoalError, attempt: number) => void;
}

function connectFailure(error: unknown, servers: readonly string[]): ShoalError {
  const shoal = toNatsShoalError(error, `cannot connect to NATS at ${redacted(servers)}`);
  // A refused connection is UNAVAILABLE whatever the client's class for it.
  return shoal.code === ErrorCode.INTERNAL ? new ShoalError(ErrorCode.UNAVAILABLE, shoal.message, { cause: error }) : shoal;
}

function isAborted(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true;
}

/**
 * One connection attempt, abandoned as soon as `signal` aborts: an attempt against a host that
 * swallows packets can take the whole connect timeout, and a stop signal must not wait for it.
 */
async function attemptConnect(natsOptions: ConnectionOptions, signal: AbortSignal | undefined): Promise<NatsConnection> {
  const attempt = connect({ ...natsOptions, waitOnFirstConnect: false });
  if (signal === undefined) return attempt;
  let onAbort = (): void => undefined;
  const stopped = new Promise<never>((_resolve, reject) => {
    onAbort = () => reject(new ShoalError(ErrorCode.CANCELLED, 'stopped while connecting to NATS'));
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([attempt, stopped]);
  } catch (error) {
    // A connection that completes after the stop is closed, never leaked.
    if (signal.aborted) void attempt.then((nc) => nc.close(), () => undefined);
    throw error;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * The first connection. Services retry it forever (the broker may start after them), but each
 * attempt is logged ("connecting to nats://... (attempt n)") and so is each failure with its
 * reason (wrong credentials, refused, timed out: a silent retry loop looked like a hang), and the
 * signal stops the retries, and an attempt in progress, at once.
 */
async function firstConnection(settings: NatsConnectionSettings, natsOptions: ConnectionOptions, backoff: ReconnectBackoff, options: ConnectNatsOptions): Promise<NatsConnection> {
  const { logger, signal } = options;
  const servers = redacted(settings.servers);
  for (let attempt = 1; ; attempt++) {
    if (signal?.aborted === true) throw new ShoalError(ErrorCode.CANCELLED, 'stopped while connecting to NATS');
    logger?.info({ servers, attempt }, `connecting to ${servers} (attempt ${attempt})`);
    try {
      return await attemptConnect(natsOptions, signal);
    } catch (error) {
      // The stop arrived during the attempt (the check above narrowed `aborted`, hence the call).
      if (hasErrorCode(error, ErrorCode.CANCELLED) && isAborted(signal)) throw error;
      const failure = connectFailure(error, settings.servers);
      options.onAttemptFailed?.(failure, attempt);
      if (!settings.retryFirstConnect) throw failure;
      const retryInMs = backoff.next();
      logger?.warn({ servers, attempt, code: failure.code, err: failure.message, retryInMs }, 'NATS connection failed; retrying');
      await pause(retryInMs, signal, 'stopped while connecting to NATS');
    }
  }
}

/** The servers with any credentials in their URLs removed (uri-credentials.ts), for logs and messages. */
export function redacted(servers: readonly string[]): string {
  return servers.map(hideUserInfo).join(',');
}

async function optionsFor(settings: NatsConnectionSettings, backoff: ReconnectBackoff, name: string | undefined): Promise<ConnectionOptions> {
  const options: ConnectionOptions = {
    servers: [...settings.servers],
    maxReconnectAttempts: -1,
    reconnectDelayHandler: () => backoff.next(),
    waitOnFirstConnect: settings.retryFirstConnect,
    timeout: settings.connectTimeoutMs,
    // A worker's reconnects must not give up after two identical auth errors during a rollout.
    ignoreAuthErrorAbort: settings.retryFirstConnect,
    // Without this every request builds two Error objects up front (stack traces for a timeout or
    // failure that rarely comes): about 60 µs per request-reply call. Shoal wraps NATS failures
    // in errors that name the subject and model, so the extra trace adds nothing.
    noAsyncTraces: true,
  };
  if (name !== undefined) options.name = name;
  if (settings.user !== undefined) {
    options.user = settings.user;
    options.pass = settings.pass ?? '';
  }
  if (settings.token !== undefined) options.token = settings.token;
  if (settings.credsFile !== undefined) options.authenticator = credsAuthenticator(await readCreds(settings.credsFile));
  if (settings.tls !== undefined) {
    const tls: NonNullable<ConnectionOptions['tls']> = {};
    if (settings.tls.caFile !== undefined) tls.caFile = settings.tls.caFile;
    if (settings.tls.certFile !== undefined) tls.certFile = settings.tls.certFile;
    if (settings.tls.keyFile !== undefined) tls.keyFile = settings.tls.keyFile;
    options.tls = tls;
  }
  return options;
}

/** Writes connection state changes to the log until the connection closes. */
async function logStatus(nc: NatsConnection, logger: Logger, backoff: ReconnectBackoff): Promise<void> {
  for await (const status of nc.status()) {
    switch (status.type) {
      case 'disconnect':
        logger.warn({ server: status.server }, 'NATS disconnected; reconnecting');
        break;
      case 'reconnect':
        backoff.reset();
        logger.info({ server: status.server }, 'NATS reconnected');
        break;
      case 'error':
        logger.error({ err: status.error.message }, 'NATS error');
        break;
      case 'ldm':
        logger.warn({ server: status.server }, 'NATS server entered lame-duck mode');
        break;
      case 'slowConsumer':
        logger.warn({ subject: status.sub.getSubject(), pending: status.pending }, 'NATS slow consumer');
        break;
      default:
        logger.debug({ status: status.type }, 'NATS status');
    }
  }
}

export async function connectNats(input: NatsConnectionSettingsInput | NatsConnectionSettings, options: ConnectNatsOptions = {}): Promise<NatsConnection> {
  const settings = resolveNatsSettings(input);
  const backoff = new ReconnectBackoff(settings.reconnectWaitMs, settings.reconnectMaxWaitMs);
  const natsOptions = await optionsFor(settings, backoff, options.name ?? settings.name);
  const nc = await firstConnection(settings, natsOptions, backoff, options);
  backoff.reset();
  const logger = options.logger;
  if (logger !== undefined) {
    logger.info({ server: nc.getServer() }, 'NATS connected');
    void logStatus(nc, logger, backoff).catch((error: unknown) => logger.error({ err: String(error) }, 'NATS status logging stopped'));
  } else {
    void (async () => {
      for await (const status of nc.status()) if (status.type === 'reconnect') backoff.reset();
    })().catch(() => undefined);
  }
  return nc;
}
