import type { NatsConnectionSettingsInput } from '../../adapters/nats/connection/connection.js';
import type { TopologySettingsInput } from '../../adapters/nats/connection/topology.js';
import type { S3SettingsInput } from '../../adapters/object-store/index.js';
import type { SourceOptionsInput } from '../../adapters/sources/resolve.js';
import type { StoreCredentials } from '../../adapters/stores/open.js';
import { configPathFrom, withConfigFile } from './config-file.js';
import {
  logLevelFromEnv, namedIndexesFromEnv, natsSettingsFromEnv, parseWorkerTimeoutFromEnv, runHeartbeatFromEnv, s3SettingsFromEnv,
  shoalCacheDirFromEnv, sinkCredentialsFromEnv, sourceOptionsFromEnv, splitDirs, streamReplicasFromEnv, topologySettingsFromEnv,
} from './environment.js';
import { envValue, type SettingKey } from './table.js';

/**
 * The settings of one process, built once where the process starts (each `main.ts`: the CLI's,
 * the worker's; the gateway and sink get theirs from the CLI) from the settings table: the
 * environment over the settings file (`--config` / SHOAL_CONFIG) over the table's defaults, and
 * a command's flags over all of them where the command has one. It is frozen: the variables are
 * copied when it is built, so nothing that runs later (a test, a library that sets
 * `process.env`) changes what this process was configured with, and each group below is
 * resolved and checked at most once, on first use (a command that never opens an index does not
 * fail on a bad PGSSLMODE). Nothing outside services/settings reads the environment; everything
 * else takes a ShoalSettings, or the plain option objects it hands out.
 */
export class ShoalSettings {
  readonly #variables: Readonly<NodeJS.ProcessEnv>;
  readonly #resolved = new Map<string, unknown>();

  private constructor(variables: NodeJS.ProcessEnv) {
    this.#variables = Object.freeze({ ...variables });
    Object.freeze(this);
  }

  /** The process's settings: `environment` over the settings file that `argv` or SHOAL_CONFIG names. */
  static load(argv: readonly string[], environment: NodeJS.ProcessEnv): ShoalSettings {
    return new ShoalSettings(withConfigFile(environment, configPathFrom(argv, environment)));
  }

  /** Settings from variables already merged (a test's, a library caller's `env` option). */
  static of(variables: NodeJS.ProcessEnv): ShoalSettings {
    return new ShoalSettings(variables);
  }

  /** This process's environment alone (no settings file): the default of library entry points that take no settings. */
  static fromEnvironment(): ShoalSettings {
    return new ShoalSettings(process.env);
  }

  /** `settings` as it is, or built from variables: for the functions that took an environment and still accept one. */
  static from(settings: ShoalSettings | NodeJS.ProcessEnv): ShoalSettings {
    return settings instanceof ShoalSettings ? settings : new ShoalSettings(settings);
  }

  /** The frozen variables (environment over the settings file), for the config builders in services/settings. */
  get variables(): Readonly<NodeJS.ProcessEnv> {
    return this.#variables;
  }

  /** A setting of the table: its first variable that is set and not blank, trimmed; undefined when unset. */
  value(key: SettingKey): string | undefined {
    return envValue(this.#variables, key);
  }

  #once<T>(name: string, resolve: () => T): T {
    if (this.#resolved.has(name)) return this.#resolved.get(name) as T;
    const value = resolve();
    this.#resolved.set(name, value);
    return value;
  }

  /** Credentials and timeouts of the vector stores (PGPASSWORD, CHROMA_*, QDRANT_API_KEY, SHOAL_STORE_TIMEOUT_MS). */
  get stores(): Readonly<StoreCredentials> {
    return this.#once('stores', () => Object.freeze(sinkCredentialsFromEnv(this.#variables)));
  }

  /** The S3 client's settings (AWS_* and SHOAL_S3_*). */
  get s3(): Readonly<S3SettingsInput> {
    return this.#once('s3', () => Object.freeze(s3SettingsFromEnv(this.#variables)));
  }

  /** Where models come from (models directories, hub cache, endpoint, token, offline, download timeout). */
  get sources(): Readonly<SourceOptionsInput> {
    return this.#once('sources', () => Object.freeze(sourceOptionsFromEnv(this.#variables)));
  }

  /** The NATS connection (NATS_URL, credentials, TLS). */
  get nats(): Readonly<NatsConnectionSettingsInput> {
    return this.#once('nats', () => Object.freeze(natsSettingsFromEnv(this.#variables)));
  }

  /** The subject prefix (a command's --prefix, else SHOAL_SUBJECT_PREFIX) and the stream replicas. */
  topology(prefixFlag?: string): Pick<TopologySettingsInput, 'prefix' | 'replicas'> {
    return topologySettingsFromEnv(this.#variables, prefixFlag);
  }

  /** SHOAL_STREAM_REPLICAS, checked; undefined when unset. */
  get streamReplicas(): number | undefined {
    return this.#once('streamReplicas', () => streamReplicasFromEnv(this.#variables));
  }

  /** SHOAL_INDEXES by name; undefined when unset. */
  get indexes(): Readonly<Record<string, string>> | undefined {
    return this.#once('indexes', () => {
      const indexes = namedIndexesFromEnv(this.#variables);
      return indexes === undefined ? undefined : Object.freeze(indexes);
    });
  }

  /** Shoal's cache folder (SHOAL_CACHE_DIR, else ~/.cache/shoal). */
  get cacheDir(): string {
    return this.#once('cacheDir', () => shoalCacheDirFromEnv(this.#variables));
  }

  /** SHOAL_FILE_ROOTS as folders (none when unset). */
  get fileRoots(): readonly string[] {
    return this.#once('fileRoots', () => Object.freeze(splitDirs(this.value('fileRoots')) ?? []));
  }

  /** SHOAL_LOG_LEVEL, else `fallback` (the table's default). */
  logLevel(fallback?: string): string {
    return logLevelFromEnv(this.#variables, fallback);
  }

  get parseWorkerTimeoutMs(): number {
    return this.#once('parseWorkerTimeoutMs', () => parseWorkerTimeoutFromEnv(this.#variables));
  }

  get runHeartbeatMs(): number {
    return this.#once('runHeartbeatMs', () => runHeartbeatFromEnv(this.#variables));
  }
}
