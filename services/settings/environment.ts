import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import type { NatsConnectionSettingsInput } from '../../adapters/nats/connection/connection.js';
import type { TopologySettingsInput } from '../../adapters/nats/connection/topology.js';
import type { StoreCredentials } from '../../adapters/stores/open.js';
import { STORE_SETTINGS } from '../../adapters/stores/registry.js';
import type { StoreSettingSpec } from '../../adapters/stores/store-backend.js';
import type { S3SettingsInput } from '../../adapters/object-store/index.js';
import type { SourceOptionsInput } from '../../adapters/sources/resolve.js';
import { envValue, isTrueValue, SETTINGS } from './table.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { redactUri } from '../../adapters/protocol/uri-credentials.js';

/**
 * The environment, read in one place: each function turns the variables of one group of
 * settings (settings/table.ts) into the plain option object an adapter or pipeline takes.
 * Services call these once at start-up, merge flags on top, validate and freeze.
 */

/** `:`-separated folders (or `,`-separated names) as a list; blank entries dropped. */
export function splitList(value: string | undefined, separator: string = ','): string[] | undefined {
  return value?.split(separator).map((part) => part.trim()).filter((part) => part !== '');
}

/** Folder lists use the platform's path delimiter (`:` on Linux and macOS). */
export function splitDirs(value: string | undefined): string[] | undefined {
  return splitList(value, delimiter);
}

/**
 * HF_HUB_CACHE (or its old name HUGGINGFACE_HUB_CACHE), else HF_HOME/hub, else
 * $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub: the hub library's own order.
 */
export function hubCacheDirFromEnv(env: NodeJS.ProcessEnv): string {
  const nonEmpty = (value: string | undefined): value is string => value !== undefined && value !== '';
  if (nonEmpty(env.HF_HUB_CACHE)) return env.HF_HUB_CACHE;
  if (nonEmpty(env.HUGGINGFACE_HUB_CACHE)) return env.HUGGINGFACE_HUB_CACHE;
  if (nonEmpty(env.HF_HOME)) return join(env.HF_HOME, 'hub');
  const xdg = nonEmpty(env.XDG_CACHE_HOME) ? env.XDG_CACHE_HOME : join(homedir(), '.cache');
  return join(xdg, 'huggingface', 'hub');
}

/** Shoal's own cache folder: SHOAL_CACHE_DIR, else ~/.cache/shoal (quantized graphs, tuning results). */
export function shoalCacheDirFromEnv(env: NodeJS.ProcessEnv): string {
  return envValue(env, 'cacheDir') ?? join(homedir(), '.cache', 'shoal');
}

/** Where models come from: models directories, hub cache, endpoint, token, offline switch, download timeout. */
export function sourceOptionsFromEnv(env: NodeJS.ProcessEnv): SourceOptionsInput {
  const out: SourceOptionsInput = { hubCacheDir: hubCacheDirFromEnv(env) };
  const modelDirs = splitDirs(envValue(env, 'modelDir'));
  if (modelDirs !== undefined) out.modelDirs = modelDirs;
  const endpoint = envValue(env, 'hubEndpoint');
  if (endpoint !== undefined) out.hubEndpoint = endpoint;
  const token = envValue(env, 'hubToken');
  if (token !== undefined) out.hubToken = token;
  if (SETTINGS.offline.env.some((name) => isTrueValue(env[name]))) out.allowDownload = false;
  // The hub library's read timeout, in seconds: the same idea as Shoal's idle timeout.
  const timeout = envValue(env, 'downloadTimeout');
  if (timeout !== undefined) out.downloadIdleTimeoutMs = Math.round(Number(timeout) * 1000);
  return out;
}

/** NATS_URL (comma-separated), NATS_USER/NATS_PASSWORD, NATS_TOKEN, NATS_CREDS, NATS_TLS_CA/CERT/KEY. */
export function natsSettingsFromEnv(env: NodeJS.ProcessEnv): NatsConnectionSettingsInput {
  const out: NatsConnectionSettingsInput = {};
  const servers = splitList(envValue(env, 'natsUrl'));
  if (servers !== undefined) out.servers = servers;
  const user = env.NATS_USER?.trim();
  if (user !== undefined && user !== '') {
    out.user = user;
    out.pass = env.NATS_PASSWORD ?? '';
  }
  const token = envValue(env, 'natsToken');
  if (token !== undefined) out.token = token;
  const creds = envValue(env, 'natsCreds');
  if (creds !== undefined) out.credsFile = creds;
  const read = (name: string): string | undefined => (env[name]?.trim() === '' ? undefined : env[name]?.trim());
  const tls = { caFile: read('NATS_TLS_CA'), certFile: read('NATS_TLS_CERT'), keyFile: read('NATS_TLS_KEY') };
  if (tls.caFile !== undefined || tls.certFile !== undefined || tls.keyFile !== undefined) {
    out.tls = Object.fromEntries(Object.entries(tls).filter(([, value]) => value !== undefined));
  }
  return out;
}

/**
 * SHOAL_STREAM_REPLICAS: replicas of the streams, KV buckets and object store a service creates
 * (a whole number from 1 to 5, as JetStream allows); undefined when unset (the topology's default, 1).
 */
export function streamReplicasFromEnv(env: NodeJS.ProcessEnv): number | undefined {
  const value = envValue(env, 'streamReplicas');
  if (value === undefined) return undefined;
  if (!/^[1-5]$/.test(value)) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `SHOAL_STREAM_REPLICAS must be a whole number from 1 to 5, at most the number of NATS servers in the cluster (got ${JSON.stringify(value.slice(0, 64))})`);
  }
  return Number(value);
}

/**
 * The topology settings of a NATS client command (`shoal sink`, `submit`, `ingest --nats`,
 * `classify --nats`): the subject prefix (the command's --prefix, else SHOAL_SUBJECT_PREFIX) and
 * the replica count (SHOAL_STREAM_REPLICAS); what is unset is left out, for the topology's defaults.
 */
export function topologySettingsFromEnv(env: NodeJS.ProcessEnv, prefixFlag?: string): Pick<TopologySettingsInput, 'prefix' | 'replicas'> {
  const out: Pick<TopologySettingsInput, 'prefix' | 'replicas'> = {};
  const prefix = prefixFlag ?? envValue(env, 'subjectPrefix');
  if (prefix !== undefined) out.prefix = prefix;
  const replicas = streamReplicasFromEnv(env);
  if (replicas !== undefined) out.replicas = replicas;
  return out;
}

/** SHOAL_LOG_LEVEL, else the given default; `--quiet` callers pass 'error' instead. */
export function logLevelFromEnv(env: NodeJS.ProcessEnv, fallback: string = String(SETTINGS.logLevel.default)): string {
  return envValue(env, 'logLevel') ?? fallback;
}

/** SHOAL_NATIVE_TRIM=0 turns the malloc_trim addon off. */
export function nativeTrimFromEnv(env: NodeJS.ProcessEnv): boolean {
  return env.SHOAL_NATIVE_TRIM?.trim() !== '0';
}

/** SHOAL_MAPPED_WEIGHTS=0 loads graphs as they are instead of from their mapped copies. */
export function mappedWeightsFromEnv(env: NodeJS.ProcessEnv): boolean {
  return env.SHOAL_MAPPED_WEIGHTS?.trim() !== '0';
}

/**
 * S3 from the standard AWS variables: AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL (path-style when
 * set), AWS_REGION, AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), AWS_PROFILE,
 * AWS_MAX_ATTEMPTS, and SHOAL_S3_BUCKETS. Read here rather than left to the SDK so a settings
 * file can hold them too; what is unset falls to the SDK's chains (instance roles, SSO...).
 */
export function s3SettingsFromEnv(env: NodeJS.ProcessEnv): S3SettingsInput {
  const out: S3SettingsInput = {};
  const endpoint = envValue(env, 's3Endpoint');
  if (endpoint !== undefined) out.endpoint = endpoint;
  const region = envValue(env, 's3Region');
  if (region !== undefined) out.region = region;
  const keyId = env.AWS_ACCESS_KEY_ID?.trim();
  const secret = env.AWS_SECRET_ACCESS_KEY?.trim();
  if (keyId !== undefined && keyId !== '' && secret !== undefined && secret !== '') {
    const token = env.AWS_SESSION_TOKEN?.trim();
    out.credentials = { accessKeyId: keyId, secretAccessKey: secret, ...(token === undefined || token === '' ? {} : { sessionToken: token }) };
  }
  const profile = envValue(env, 's3Profile');
  if (profile !== undefined) out.profile = profile;
  const attempts = envValue(env, 's3MaxAttempts');
  if (attempts !== undefined) out.maxAttempts = Number(attempts);
  const buckets = splitList(envValue(env, 's3Buckets'));
  if (buckets !== undefined) out.allowedBuckets = buckets;
  return out;
}

/**
 * The settings the store backends declare (adapters/stores/<backend>/backend.ts, merged in the
 * registry's STORE_SETTINGS: PGPASSWORD, PGSSLMODE, CHROMA_*, QDRANT_API_KEY,
 * SHOAL_STORE_TIMEOUT_MS...), each read by its variables: a backend's new variable needs no code
 * here. A setting whose default is a number is a timer in ms: a whole number from 1 to 2^31-1.
 */
export function sinkCredentialsFromEnv(env: NodeJS.ProcessEnv): StoreCredentials {
  const out: Record<string, string | number | undefined> = {};
  for (const [key, spec] of Object.entries(STORE_SETTINGS) as [keyof StoreCredentials, StoreSettingSpec][]) {
    const value = envValue(env, key);
    out[key] = typeof spec.default === 'number' && value !== undefined ? timerMs(spec.env[0] ?? key, value) : value;
  }
  return out;
}

/** A timer's milliseconds, 1 to 2^31-1 (what setTimeout takes), or CONFIG_INVALID naming the variable. */
function timerMs(variable: string, value: string): number {
  const ms = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(ms) || ms < 1 || ms > 2_147_483_647) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `${variable}: ${JSON.stringify(value.slice(0, 40))} is not a whole number of milliseconds from 1 to 2147483647`);
  }
  return ms;
}

/**
 * SHOAL_INDEXES (`name=target,name2=target2`): the indexes a request or a job may name. The
 * results sink opens them for `{kind: "index"}` job targets; `shoal submit` and the gateway refuse
 * other names at submit. Undefined when unset.
 */
export function namedIndexesFromEnv(env: NodeJS.ProcessEnv): Record<string, string> | undefined {
  const value = envValue(env, 'indexes');
  if (value === undefined || value.trim() === '') return undefined;
  const out: Record<string, string> = {};
  for (const entry of value.split(',').map((part) => part.trim()).filter((part) => part !== '')) {
    const at = entry.indexOf('=');
    const name = entry.slice(0, at).trim();
    const target = entry.slice(at + 1).trim();
    if (at <= 0 || !/^[A-Za-z0-9_-]{1,64}$/.test(name) || target === '') {
      // The target's password is hidden by the shared rule (one holding '/' or '@' included).
      const shown = at < 0 ? redactUri(entry) : `${entry.slice(0, at)}=${redactUri(target)}`;
      throw new ShoalError(ErrorCode.CONFIG_INVALID, `SHOAL_INDEXES: ${JSON.stringify(shown)} must be name=target (name: letters, digits, _ or -, up to 64)`);
    }
    out[name] = target;
  }
  return out;
}

/**
 * SHOAL_PARSE_WORKER_TIMEOUT_MS: how long an ingest run over NATS waits with no parse worker
 * before it fails (ms, at least 1000).
 */
export function parseWorkerTimeoutFromEnv(env: NodeJS.ProcessEnv): number {
  const value = envValue(env, 'parseWorkerTimeoutMs');
  if (value === undefined) return SETTINGS.parseWorkerTimeoutMs.default;
  if (!/^\d+$/.test(value) || Number(value) < 1000) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `SHOAL_PARSE_WORKER_TIMEOUT_MS must be a whole number of milliseconds, at least 1000 (got ${JSON.stringify(value.slice(0, 64))})`);
  }
  return Number(value);
}

/**
 * SHOAL_RUN_HEARTBEAT_MS: how often an ingest coordinator rewrites its run's status (ms, at least
 * 100); a run silent for 6 times this is abandoned (pipelines/documents/run-lease.ts).
 */
export function runHeartbeatFromEnv(env: NodeJS.ProcessEnv): number {
  const value = envValue(env, 'runHeartbeatMs');
  if (value === undefined) return SETTINGS.runHeartbeatMs.default;
  if (!/^\d+$/.test(value) || Number(value) < 100 || Number(value) > 3_600_000) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `SHOAL_RUN_HEARTBEAT_MS must be a whole number of milliseconds from 100 to 3600000 (got ${JSON.stringify(value.slice(0, 64))})`);
  }
  return Number(value);
}
