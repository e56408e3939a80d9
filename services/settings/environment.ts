import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import type { NatsConnectionSettingsInput } from '../../adapters/nats/connection.js';
import type { SourceOptionsInput } from '../../adapters/sources/resolve.js';
import { envValue, isTrueValue, SETTINGS } from './table.js';

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

/** SHOAL_LOG_LEVEL, else the given default; `--quiet` callers pass 'error' instead. */
export function logLevelFromEnv(env: NodeJS.ProcessEnv, fallback: string = String(SETTINGS.logLevel.default)): string {
  return envValue(env, 'logLevel') ?? fallback;
}

/** SHOAL_NATIVE_TRIM=0 turns the malloc_trim addon off. */
export function nativeTrimFromEnv(env: NodeJS.ProcessEnv): boolean {
  return env.SHOAL_NATIVE_TRIM?.trim() !== '0';
}
