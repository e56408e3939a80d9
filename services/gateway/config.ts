import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { DEFAULT_SUBJECT_PREFIX } from '../../adapters/protocol/subjects.js';
import { natsSettingsFromEnv, resolveNatsSettings, type NatsConnectionSettings } from '../../adapters/nats/connection.js';
import { parseBytes } from '../../pipelines/inference/memory.js';
import type { GatewaySettings } from './app.js';
import { DEFAULT_BODY_LIMIT, DEFAULT_GATEWAY_PORT, DEFAULT_REQUEST_TIMEOUT_MS, DEFAULT_SHUTDOWN_TIMEOUT_MS } from './defaults.js';

/**
 * The gateway's configuration: flags over SHOAL_* environment variables over defaults, validated
 * once with zod and frozen. Tokens never come from a flag (they would show in `ps`): from
 * SHOAL_API_TOKENS (comma-separated) and/or a file (one per line, `#` comments). The NATS
 * connection follows the conventional NATS_URL / NATS_CREDS / NATS_USER... variables (shared
 * with the worker, adapters/nats/connection.ts); --nats and --nats-creds override them.
 */

/** What the command line hands over: every flag as the raw string typed (or absent). */
export interface GatewayFlags {
  host?: string | undefined;
  port?: string | undefined;
  apiTokensFile?: string | undefined;
  metricsAuth?: boolean | undefined;
  bodyLimit?: string | undefined;
  requestTimeoutMs?: string | undefined;
  shutdownTimeoutMs?: string | undefined;
  natsUrl?: string | undefined;
  natsCreds?: string | undefined;
  natsPrefix?: string | undefined;
  corsOrigins?: string | undefined;
  embedModel?: string | undefined;
  rerankModel?: string | undefined;
}

const WholeNumber = (min: number, max: number) =>
  z
    .string()
    .trim()
    .regex(/^\d+$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

const CommaList = z.string().transform((value) => value.split(',').map((part) => part.trim()).filter((part) => part !== ''));

const ByteSize = z
  .string()
  .trim()
  .refine((value) => !value.endsWith('%'), 'must be a size such as 8MiB or 1000000, not a percentage')
  .transform((value, ctx) => {
    try {
      return parseBytes(value);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: error instanceof Error ? error.message : String(error) });
      return z.NEVER;
    }
  })
  .pipe(z.number().int().min(1024, 'must be at least 1KiB'));

const NatsUrl = z.string().regex(/^(nats|tls|wss?):\/\/[^\s,]+$/, 'must be nats://host:port (or tls://, ws://, wss://)');

/** Keys are named after the flags, so a message like `port: ...` points at `--port`. */
const RawGatewayConfig = z.strictObject({
  host: z.string().trim().min(1).default('0.0.0.0'),
  port: WholeNumber(0, 65_535).default(DEFAULT_GATEWAY_PORT),
  'api-tokens': z.array(z.string().min(16, 'tokens must be at least 16 characters').regex(/^\S+$/, 'tokens must not contain spaces')).default([]),
  'metrics-auth': z.boolean().default(false),
  'body-limit': ByteSize.default(parseBytes(DEFAULT_BODY_LIMIT)),
  'request-timeout-ms': WholeNumber(1, 3_600_000).default(DEFAULT_REQUEST_TIMEOUT_MS),
  'shutdown-timeout-ms': WholeNumber(0, 3_600_000).default(DEFAULT_SHUTDOWN_TIMEOUT_MS),
  nats: CommaList.pipe(z.array(NatsUrl).min(1)).optional(),
  'nats-creds': z.string().trim().min(1).optional(),
  prefix: z.string().trim().min(1).default(DEFAULT_SUBJECT_PREFIX),
  'cors-origins': CommaList.pipe(z.array(z.string().regex(/^(\*|https?:\/\/[^\s/]+)$/, 'origins are * or scheme://host[:port]'))).default([]),
  'embed-model': z.string().trim().min(1).optional(),
  'rerank-model': z.string().trim().min(1).optional(),
});

const ENV_NAMES: ReadonlyMap<string, string> = new Map([
  ['host', 'SHOAL_HOST'],
  ['port', 'SHOAL_PORT'],
  ['api-tokens', 'SHOAL_API_TOKENS / SHOAL_API_TOKENS_FILE'],
  ['metrics-auth', 'SHOAL_METRICS_AUTH'],
  ['body-limit', 'SHOAL_BODY_LIMIT'],
  ['request-timeout-ms', 'SHOAL_REQUEST_TIMEOUT_MS'],
  ['shutdown-timeout-ms', 'SHOAL_SHUTDOWN_TIMEOUT_MS'],
  ['nats', 'NATS_URL'],
  ['nats-creds', 'NATS_CREDS'],
  ['prefix', 'SHOAL_SUBJECT_PREFIX'],
  ['cors-origins', 'SHOAL_CORS_ORIGINS'],
  ['embed-model', 'SHOAL_EMBED_MODEL'],
  ['rerank-model', 'SHOAL_RERANK_MODEL'],
]);

export interface GatewayConfig extends GatewaySettings {
  readonly host: string;
  readonly port: number;
  readonly shutdownTimeoutMs: number;
  /** Connection settings (servers, credentials, TLS, reconnects), validated. */
  readonly nats: NatsConnectionSettings;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value;
}

function isTrue(value: string | undefined): boolean | undefined {
  if (nonEmpty(value) === undefined) return undefined;
  return ['1', 'true', 'yes', 'on'].includes((value ?? '').trim().toLowerCase());
}

/** Tokens from a file: one per line; blank lines and `#` comments skipped. */
function readTokenFile(path: string): string[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `cannot read the API tokens file ${path}: ${String(error)}`, { cause: error });
  }
  return text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

function apiTokens(flags: GatewayFlags, env: NodeJS.ProcessEnv): string[] | undefined {
  const listed = nonEmpty(env.SHOAL_API_TOKENS)?.split(',').map((t) => t.trim()).filter((t) => t !== '') ?? [];
  const file = flags.apiTokensFile ?? nonEmpty(env.SHOAL_API_TOKENS_FILE);
  const fromFile = file === undefined ? [] : readTokenFile(file);
  const all = [...listed, ...fromFile];
  return all.length === 0 ? undefined : all;
}

/** NATS_* variables, with the command line's server list and creds file over them. */
function natsSettings(servers: string[] | undefined, credsFile: string | undefined, env: NodeJS.ProcessEnv): NatsConnectionSettings {
  const fromEnv = natsSettingsFromEnv(env);
  if (servers !== undefined) fromEnv.servers = servers;
  if (credsFile !== undefined) {
    // A creds file replaces whatever other credentials the environment holds.
    delete fromEnv.user;
    delete fromEnv.pass;
    delete fromEnv.token;
    fromEnv.credsFile = credsFile;
  }
  return resolveNatsSettings({ ...fromEnv, name: 'shoal-gateway' });
}

/** Flags win over the environment; an empty environment variable counts as unset. */
export function resolveGatewayConfig(flags: GatewayFlags = {}, env: NodeJS.ProcessEnv = process.env): GatewayConfig {
  const raw = {
    host: flags.host ?? nonEmpty(env.SHOAL_HOST),
    port: flags.port ?? nonEmpty(env.SHOAL_PORT),
    'api-tokens': apiTokens(flags, env),
    'metrics-auth': flags.metricsAuth ?? isTrue(env.SHOAL_METRICS_AUTH),
    'body-limit': flags.bodyLimit ?? nonEmpty(env.SHOAL_BODY_LIMIT),
    'request-timeout-ms': flags.requestTimeoutMs ?? nonEmpty(env.SHOAL_REQUEST_TIMEOUT_MS),
    'shutdown-timeout-ms': flags.shutdownTimeoutMs ?? nonEmpty(env.SHOAL_SHUTDOWN_TIMEOUT_MS),
    nats: flags.natsUrl,
    'nats-creds': flags.natsCreds,
    prefix: flags.natsPrefix ?? nonEmpty(env.SHOAL_SUBJECT_PREFIX),
    'cors-origins': flags.corsOrigins ?? nonEmpty(env.SHOAL_CORS_ORIGINS),
    'embed-model': flags.embedModel ?? nonEmpty(env.SHOAL_EMBED_MODEL),
    'rerank-model': flags.rerankModel ?? nonEmpty(env.SHOAL_RERANK_MODEL),
  };
  const result = RawGatewayConfig.safeParse(raw);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => {
      const key = String(issue.path[0] ?? '');
      const envName = ENV_NAMES.get(key);
      // Token values are never echoed: the message names the position only.
      const where = envName === undefined ? key : `--${key} (or ${envName})`;
      return `${where}: ${issue.message}`;
    });
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `invalid gateway configuration: ${problems.join('; ')}`);
  }
  const c = result.data;
  return Object.freeze({
    host: c.host,
    port: c.port,
    apiTokens: Object.freeze([...c['api-tokens']]),
    protectMetrics: c['metrics-auth'],
    bodyLimitBytes: c['body-limit'],
    requestTimeoutMs: c['request-timeout-ms'],
    shutdownTimeoutMs: c['shutdown-timeout-ms'],
    corsOrigins: Object.freeze([...c['cors-origins']]),
    embedModel: c['embed-model'] ?? null,
    rerankModel: c['rerank-model'] ?? null,
    natsPrefix: c.prefix,
    nats: natsSettings(c.nats, c['nats-creds'], env),
  });
}
