import { ShoalSettings } from '../settings/shoal-settings.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { DEFAULT_SUBJECT_PREFIX } from '../../adapters/protocol/subjects.js';
import { resolveNatsSettings, type NatsConnectionSettings } from '../../adapters/nats/connection/connection.js';
import type { S3SettingsInput } from '../../adapters/object-store/index.js';
import { parseBytes } from '../../pipelines/inference/memory.js';
import type { GatewaySettings } from './context.js';
import { splitList} from '../settings/environment.js';
import { CommaListFlag, NatsUrlsFlag, WholeNumberFlag } from '../settings/flag-values.js';
import { isTrueValue, SETTINGS, type SettingKey } from '../settings/table.js';
import { DEFAULT_BODY_LIMIT, DEFAULT_DRAIN_DELAY_MS, DEFAULT_GATEWAY_HOST, DEFAULT_GATEWAY_PORT, DEFAULT_REQUEST_TIMEOUT_MS, DEFAULT_SHUTDOWN_TIMEOUT_MS } from './defaults.js';

/**
 * The gateway's configuration: flags over SHOAL_* environment variables over defaults, validated
 * once with zod and frozen. Tokens never come from a flag (they would show in `ps`): from
 * SHOAL_API_TOKENS (comma-separated) and/or a file (one per line, `#` comments). The NATS
 * connection follows the conventional NATS_URL / NATS_CREDS / NATS_USER... variables (shared
 * with the worker, adapters/nats/connection/connection.ts); --nats and --nats-creds override them.
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
  drainDelayMs?: string | undefined;
  natsUrl?: string | undefined;
  natsCreds?: string | undefined;
  natsPrefix?: string | undefined;
  corsOrigins?: string | undefined;
  embedModel?: string | undefined;
  rerankModel?: string | undefined;
  sparseModel?: string | undefined;
  maxInflightItems?: string | undefined;
  maxQueueSeconds?: string | undefined;
}


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

/** Keys are named after the flags, so a message like `port: ...` points at `--port`. */
const RawGatewayConfig = z.strictObject({
  host: z.string().trim().min(1).default(DEFAULT_GATEWAY_HOST),
  port: WholeNumberFlag(0, 65_535).default(DEFAULT_GATEWAY_PORT),
  'api-tokens': z.array(z.string().min(16, 'tokens must be at least 16 characters').regex(/^\S+$/, 'tokens must not contain spaces')).default([]),
  'metrics-auth': z.boolean().default(false),
  'body-limit': ByteSize.default(parseBytes(DEFAULT_BODY_LIMIT)),
  'request-timeout-ms': WholeNumberFlag(1, 3_600_000).default(DEFAULT_REQUEST_TIMEOUT_MS),
  'shutdown-timeout-ms': WholeNumberFlag(0, 3_600_000).default(DEFAULT_SHUTDOWN_TIMEOUT_MS),
  'drain-delay-ms': WholeNumberFlag(0, 600_000).default(DEFAULT_DRAIN_DELAY_MS),
  nats: NatsUrlsFlag.optional(),
  'nats-creds': z.string().trim().min(1).optional(),
  prefix: z.string().trim().min(1).default(DEFAULT_SUBJECT_PREFIX),
  'cors-origins': CommaListFlag.pipe(z.array(z.string().regex(/^(\*|https?:\/\/[^\s/]+)$/, 'origins are * or scheme://host[:port]'))).default([]),
  'max-inflight-items': WholeNumberFlag(1, 10_000_000).default(SETTINGS.maxInFlightItems.default),
  'max-queue-seconds': WholeNumberFlag(1, 3600).default(SETTINGS.maxQueueSeconds.default),
  'job-timeout-ms': WholeNumberFlag(1000, 30 * 86_400_000).default(SETTINGS.jobTimeoutMs.default),
  'submit-timeout-ms': WholeNumberFlag(1000, 86_400_000).default(SETTINGS.submitTimeoutMs.default),
  'embed-model': z.string().trim().min(1).optional(),
  'rerank-model': z.string().trim().min(1).optional(),
  'sparse-model': z.string().trim().min(1).optional(),
  'classify-sync-items': WholeNumberFlag(0, 100_000).default(SETTINGS.classifySyncItems.default),
  'classify-results-dir': z.string().trim().min(1).optional(),
});

/** Setting (settings/table.ts) behind each flag-named key, for messages. */
const SETTING_OF_KEY: ReadonlyMap<string, SettingKey> = new Map([
  ['host', 'host'],
  ['port', 'port'],
  ['metrics-auth', 'metricsAuth'],
  ['body-limit', 'bodyLimit'],
  ['request-timeout-ms', 'requestTimeoutMs'],
  ['shutdown-timeout-ms', 'shutdownTimeoutMs'],
  ['drain-delay-ms', 'drainDelayMs'],
  ['nats', 'natsUrl'],
  ['nats-creds', 'natsCreds'],
  ['prefix', 'subjectPrefix'],
  ['cors-origins', 'corsOrigins'],
  ['max-inflight-items', 'maxInFlightItems'],
  ['max-queue-seconds', 'maxQueueSeconds'],
  ['job-timeout-ms', 'jobTimeoutMs'],
  ['submit-timeout-ms', 'submitTimeoutMs'],
  ['embed-model', 'embedModel'],
  ['rerank-model', 'rerankModel'],
  ['sparse-model', 'sparseModel'],
  ['classify-sync-items', 'classifySyncItems'],
  ['classify-results-dir', 'classifyResultsDir'],
]);

function envNames(key: string): string | undefined {
  if (key === 'api-tokens') return 'SHOAL_API_TOKENS / SHOAL_API_TOKENS_FILE';
  const setting = SETTING_OF_KEY.get(key);
  return setting === undefined ? undefined : SETTINGS[setting].env.join(', ');
}

export interface GatewayConfig extends GatewaySettings {
  readonly host: string;
  readonly port: number;
  readonly shutdownTimeoutMs: number;
  /** After SIGTERM: serving on, /readyz 503, this long before the port closes. @default 0 */
  readonly drainDelayMs: number;
  /** Job deadline and submission deadline (JobsClient options); absent: the client's defaults. */
  readonly jobs?: { readonly jobTimeoutMs: number; readonly submitTimeoutMs: number; readonly fileRoots?: readonly string[]; readonly checkFileTargets?: boolean; readonly s3?: S3SettingsInput };
  /** Connection settings (servers, credentials, TLS, reconnects), validated. */
  readonly nats: NatsConnectionSettings;
  /** Replicas of the streams, KV buckets and object store the gateway creates when missing (SHOAL_STREAM_REPLICAS). @default 1 */
  readonly streamReplicas?: number;
  /** POST /v1/ingest runs fail after this long with no parse worker (SHOAL_PARSE_WORKER_TIMEOUT_MS). @default 300000 */
  readonly parseWorkerTimeoutMs?: number;
  /** How often a POST /v1/ingest run's status is rewritten (SHOAL_RUN_HEARTBEAT_MS); silent 6 times this: abandoned. @default 5000 */
  readonly runHeartbeatMs?: number;
}

/** An unset variable stays unset (the default applies); a set one is read as the hub library reads booleans. */
function isTrue(value: string | undefined): boolean | undefined {
  return value === undefined ? undefined : isTrueValue(value);
}

/** Tokens from a file: one per line; blank lines and `#` comments skipped. */
function readTokenFile(path: string): string[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `cannot read the API tokens file ${path}: ${String(error)}`, { cause: error });
  }
  const tokens = text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  // Asking for a tokens file and getting none (an empty or unfilled secret) must not turn authentication off silently.
  if (tokens.length === 0) throw new ShoalError(ErrorCode.CONFIG_INVALID, `the API tokens file ${path} holds no token (one per line; blank and # lines are skipped): the gateway would run without authentication`);
  return tokens;
}

function apiTokens(flags: GatewayFlags, settings: ShoalSettings): string[] | undefined {
  const listed = splitList(settings.value('apiTokens')) ?? [];
  const file = flags.apiTokensFile ?? settings.value('apiTokensFile');
  const fromFile = file === undefined ? [] : readTokenFile(file);
  const all = [...listed, ...fromFile];
  return all.length === 0 ? undefined : all;
}

/** NATS_* variables, with the command line's server list and creds file over them. */
function natsSettings(servers: string[] | undefined, credsFile: string | undefined, settings: ShoalSettings): NatsConnectionSettings {
  const fromEnv = { ...settings.nats };
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
/** `from`: the process's settings (services/cli builds them once), or variables (tests). */
export function resolveGatewayConfig(flags: GatewayFlags, from: ShoalSettings | NodeJS.ProcessEnv): GatewayConfig {
  const settings = ShoalSettings.from(from);
  const raw = {
    host: flags.host ?? settings.value('host'),
    port: flags.port ?? settings.value('port'),
    'api-tokens': apiTokens(flags, settings),
    'metrics-auth': flags.metricsAuth ?? isTrue(settings.value('metricsAuth')),
    'body-limit': flags.bodyLimit ?? settings.value('bodyLimit'),
    'request-timeout-ms': flags.requestTimeoutMs ?? settings.value('requestTimeoutMs'),
    'shutdown-timeout-ms': flags.shutdownTimeoutMs ?? settings.value('shutdownTimeoutMs'),
    'drain-delay-ms': flags.drainDelayMs ?? settings.value('drainDelayMs'),
    nats: flags.natsUrl,
    'nats-creds': flags.natsCreds,
    prefix: flags.natsPrefix ?? settings.value('subjectPrefix'),
    'cors-origins': flags.corsOrigins ?? settings.value('corsOrigins'),
    'max-inflight-items': flags.maxInflightItems ?? settings.value('maxInFlightItems'),
    'max-queue-seconds': flags.maxQueueSeconds ?? settings.value('maxQueueSeconds'),
    'job-timeout-ms': settings.value('jobTimeoutMs'),
    'submit-timeout-ms': settings.value('submitTimeoutMs'),
    'embed-model': flags.embedModel ?? settings.value('embedModel'),
    'rerank-model': flags.rerankModel ?? settings.value('rerankModel'),
    'sparse-model': flags.sparseModel ?? settings.value('sparseModel'),
    'classify-sync-items': settings.value('classifySyncItems'),
    'classify-results-dir': settings.value('classifyResultsDir'),
  };
  const result = RawGatewayConfig.safeParse(raw);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => {
      const key = String(issue.path[0] ?? '');
      const envName = envNames(key);
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
    drainDelayMs: c['drain-delay-ms'],
    corsOrigins: Object.freeze([...c['cors-origins']]),
    embedModel: c['embed-model'] ?? null,
    rerankModel: c['rerank-model'] ?? null,
    sparseModel: c['sparse-model'] ?? null,
    natsPrefix: c.prefix,
    // Index names requests may use (POST /v1/search, /v1/ingest); a request never names a path.
    ...(settings.indexes === undefined ? {} : { indexes: settings.indexes }),
    indexOptions: Object.freeze({ credentials: settings.stores, s3: settings.s3 }),
    // Classification jobs: results under the cache unless placed elsewhere; categories cached there too, so a taxonomy is embedded once.
    classify: Object.freeze({ syncItems: c['classify-sync-items'], resultsDir: c['classify-results-dir'] ?? join(settings.cacheDir, 'classify-jobs'), cacheDir: settings.cacheDir }),
    admission: Object.freeze({ maxInFlightItemsPerModel: c['max-inflight-items'], maxQueueSeconds: c['max-queue-seconds'] }),
    // The workers' file roots (SHOAL_FILE_ROOTS, shared config): file:// targets outside them are refused at submit, and results inside them can be read back.
    jobs: Object.freeze({ jobTimeoutMs: c['job-timeout-ms'], submitTimeoutMs: c['submit-timeout-ms'], fileRoots: Object.freeze([...settings.fileRoots]), checkFileTargets: true, s3: settings.s3 }),
    nats: natsSettings(c.nats, c['nats-creds'], settings),
    streamReplicas: settings.streamReplicas ?? SETTINGS.streamReplicas.default,
    parseWorkerTimeoutMs: settings.parseWorkerTimeoutMs,
    runHeartbeatMs: settings.runHeartbeatMs,
    documentJobs: isTrue(settings.value('documentJobs')) ?? false,
    classifyJobs: isTrue(settings.value('classifyJobs')) ?? false,
    pipelinesDir: settings.value('pipelinesDir') ?? null,
  });
}
