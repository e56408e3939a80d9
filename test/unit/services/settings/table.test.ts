import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { DEFAULT_NATS_URL } from '../../../../adapters/nats/connection/connection.js';
import { DEFAULT_JOB_TIMEOUT_MS, DEFAULT_SUBMIT_TIMEOUT_MS } from '../../../../adapters/nats/jobs/jobs-client.js';
import { ConsumerSettings } from '../../../../adapters/nats/connection/topology.js';
import { DEFAULT_SUBJECT_PREFIX } from '../../../../adapters/protocol/subjects.js';
import { resolveSourceOptions } from '../../../../adapters/sources/resolve.js';
import { DEFAULT_SCHEDULER_OPTIONS } from '../../../../pipelines/inference/scheduler-options.js';
import { resolveCliConfig } from '../../../../services/cli/config.js';
import { DEFAULT_ADMISSION } from '../../../../services/gateway/admission.js';
import { resolveGatewayConfig } from '../../../../services/gateway/config.js';
import { renderSettingsTable, withSettingsTable } from '../../../../services/settings/readme-table.js';
import { engineOptionsFromEnv } from '../../../../services/settings/engine-settings.js';
import { SETTINGS } from '../../../../services/settings/table.js';
import { DEFAULT_RESULTS_DIR } from '../../../../services/sink/main.js';
import { parseWorkerConfig } from '../../../../services/worker/config.js';

const ROOT = fileURLToPath(new URL('../../../..', import.meta.url));

function sources(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sources(path, out);
    else if (/\.(ts|js|mjs)$/.test(name)) out.push(path);
  }
  return out;
}

const TABLE_VARIABLES = new Set<string>(Object.values(SETTINGS).flatMap((spec) => [...spec.env]));
/** Names that look like settings but are not: internal hand-offs and stream names. */
const NOT_SETTINGS = new Set(['SHOAL_PARENT_PID', 'SHOAL_JOBS', 'HF_ColBERT', 'HF_C']);

describe('settings table', () => {
  it('the settings table of docs/configuration.md is the one generated from the table', () => {
    const readme = readFileSync(join(ROOT, 'docs', 'configuration.md'), 'utf8');
    expect(readme).toContain(renderSettingsTable());
    expect(withSettingsTable(readme)).toBe(readme);
  });

  it('every variable the code names is in the table, and every variable in the table is read somewhere', () => {
    const named = new Set<string>();
    const files = [...['adapters', 'pipelines', 'services'].flatMap((dir) => sources(join(ROOT, dir))), join(ROOT, 'bin', 'shoal.js')];
    let code = '';
    for (const file of files) {
      const text = readFileSync(file, 'utf8');
      if (!file.endsWith(join('settings', 'table.ts'))) code += text;
      for (const match of text.matchAll(/\b(?:SHOAL|NATS|HF|HUGGINGFACE)_[A-Za-z_]+\b/g)) named.add(match[0]);
    }
    const missing = [...named].filter((name) => !TABLE_VARIABLES.has(name) && !NOT_SETTINGS.has(name) && !name.startsWith('HF_HUB_CACHE_'));
    expect(missing).toEqual([]);
    // A variable counts as read when code names it or reads the table entry that holds it.
    const keysUsed = new Set([...code.matchAll(/(?:envValue\(\w+(?:\.\w+)*, |\.value\()'(\w+)'\)/g)].map((m) => m[1]));
    const unread = Object.entries(SETTINGS)
      .filter(([key, spec]) => !keysUsed.has(key) && !spec.env.some((name) => code.includes(name)))
      .map(([key]) => key);
    expect(unread).toEqual([]);
  });

  it('adapters and pipelines read no environment variables', () => {
    const readers = ['adapters', 'pipelines']
      .flatMap((dir) => sources(join(ROOT, dir)))
      .filter((file) => /process\.env/.test(readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\/|^\s*\/\/.*$/gm, '')))
      .map((file) => file.slice(ROOT.length));
    expect(readers).toEqual([]);
  });

  it('the defaults the services and adapters use are the table defaults', () => {
    const gateway = resolveGatewayConfig({}, {});
    expect(gateway.host).toBe(SETTINGS.host.default);
    expect(gateway.port).toBe(SETTINGS.port.default);
    expect(gateway.requestTimeoutMs).toBe(SETTINGS.requestTimeoutMs.default);
    expect(gateway.shutdownTimeoutMs).toBe(SETTINGS.shutdownTimeoutMs.default);
    expect(gateway.bodyLimitBytes).toBe(8 * 1024 * 1024);
    expect(SETTINGS.bodyLimit.default).toBe('8MiB');
    expect(gateway.natsPrefix).toBe(SETTINGS.subjectPrefix.default);
    expect(gateway.nats.servers).toEqual([SETTINGS.natsUrl.default]);
    expect(gateway.admission).toEqual(DEFAULT_ADMISSION);
    expect(DEFAULT_ADMISSION).toEqual({ maxInFlightItemsPerModel: SETTINGS.maxInFlightItems.default, maxQueueSeconds: SETTINGS.maxQueueSeconds.default });
    expect(gateway.jobs).toMatchObject({ jobTimeoutMs: DEFAULT_JOB_TIMEOUT_MS, submitTimeoutMs: DEFAULT_SUBMIT_TIMEOUT_MS });
    expect([DEFAULT_JOB_TIMEOUT_MS, DEFAULT_SUBMIT_TIMEOUT_MS]).toEqual([SETTINGS.jobTimeoutMs.default, SETTINGS.submitTimeoutMs.default]);
    expect(resolveGatewayConfig({ maxInflightItems: '64' }, { SHOAL_JOB_TIMEOUT_MS: '60000', SHOAL_MAX_QUEUE_SECONDS: '2' })).toMatchObject({
      admission: { maxInFlightItemsPerModel: 64, maxQueueSeconds: 2 },
      jobs: { jobTimeoutMs: 60_000 },
    });

    const worker = parseWorkerConfig({ nats: {} });
    expect(worker.concurrency).toBe(SETTINGS.concurrency.default);
    expect(worker.drainTimeoutMs).toBe(SETTINGS.drainTimeoutMs.default);
    expect(worker.metricsHost).toBe(SETTINGS.metricsHost.default);
    expect(worker.engine.providers).toEqual([SETTINGS.providers.default]);
    const consumer = ConsumerSettings.parse({});
    expect(consumer.ackWaitMs).toBe(SETTINGS.ackWaitMs.default);
    expect(consumer.maxDeliver).toBe(SETTINGS.maxDeliver.default);

    expect(resolveCliConfig({}, {}).chunkLines).toBe(SETTINGS.chunkLines.default);
    expect(DEFAULT_SCHEDULER_OPTIONS.maxBatchTokens).toBe(SETTINGS.batchTokens.default);
    expect(DEFAULT_SUBJECT_PREFIX).toBe(SETTINGS.subjectPrefix.default);
    expect(DEFAULT_NATS_URL).toBe(SETTINGS.natsUrl.default);
    expect(DEFAULT_RESULTS_DIR).toBe(SETTINGS.resultsDir.default);
    const source = resolveSourceOptions();
    expect(source.hubEndpoint).toBe(SETTINGS.hubEndpoint.default);
    expect(source.downloadIdleTimeoutMs / 1000).toBe(SETTINGS.downloadTimeout.default);
  });

  it('the in-process commands read the engine variables the worker reads', () => {
    const env = { SHOAL_MEMORY_BUDGET: '3GiB', SHOAL_IMAGE_ROOTS: '/a:/b', SHOAL_IMAGE_HOSTS: 'x.org, *.y.org', SHOAL_THREADS: '3', SHOAL_BATCH_TOKENS: 'auto' };
    const cli = resolveCliConfig({}, env);
    const worker = parseWorkerConfig({ nats: {}, engine: cli.engine });
    expect(cli.engine).toMatchObject({ memoryBudget: '3GiB', imageRoots: ['/a', '/b'], imageHosts: ['x.org', '*.y.org'], threads: 3, batchTokens: 'auto' });
    expect(worker.engine).toEqual(cli.engine);
    // Flags win over the variables.
    expect(resolveCliConfig({ memoryBudget: '1GiB', threads: '2' }, env).engine).toMatchObject({ memoryBudget: '1GiB', threads: 2 });
    expect(() => resolveCliConfig({ threads: 'many' }, {})).toThrow(/--threads \(or SHOAL_THREADS\): must be a whole number/);
    expect(() => resolveCliConfig({}, { SHOAL_THREADS: 'many' })).toThrow(/--threads \(or SHOAL_THREADS\)/);
  });

  it('a bad variable is refused in the words its flag gets, naming it, not with zod\'s "expected number, received string"', () => {
    const refusal = (flags: Parameters<typeof resolveCliConfig>[0], env: Record<string, string>): string => {
      try {
        resolveCliConfig(flags, env);
      } catch (error) {
        expect(error).toMatchObject({ code: 'CONFIG_INVALID' });
        return (error as Error).message;
      }
      throw new Error('expected a refusal');
    };
    const threads = 'invalid configuration: --threads (or SHOAL_THREADS): must be a whole number from 1 to 1024';
    for (const value of ['abc', '0', '2000', '1.5']) expect(refusal({}, { SHOAL_THREADS: value }), value).toBe(threads);
    expect(refusal({ threads: 'abc' }, {})).toBe(threads);
    const batchTokens = 'invalid configuration: --batch-tokens (or SHOAL_BATCH_TOKENS): must be auto or a whole number from 1 to 16777216';
    for (const value of ['-1', '0', 'lots', '1.5']) expect(refusal({}, { SHOAL_BATCH_TOKENS: value }), value).toBe(batchTokens);
    for (const value of ['-1', '0']) expect(refusal({ batchTokens: value }, {}), value).toBe(batchTokens);
    // A variable without a flag is named as the variable, not as the field (cpuArena).
    expect(refusal({}, { SHOAL_CPU_ARENA: 'maybe' })).toBe('invalid configuration: SHOAL_CPU_ARENA: must be 1, on, true or yes (on), or 0, off, false or no (off)');
    expect(resolveCliConfig({}, { SHOAL_BATCH_TOKENS: 'auto', SHOAL_THREADS: '1024' }).engine).toMatchObject({ batchTokens: 'auto', threads: 1024 });
  });

  it('a program embedding the engine gets the same options from the environment as the CLI', () => {
    const options = engineOptionsFromEnv({ SHOAL_CACHE_DIR: '/c', SHOAL_NATIVE_TRIM: '0', HF_TOKEN: 'hf_x', SHOAL_MODEL_DIR: '/m', SHOAL_THREADS: '2' });
    expect(options.runtime).toMatchObject({ cacheDir: '/c', returnFreedMemory: false, intraOpThreads: 2, providers: ['cpu'] });
    expect(options.sources).toMatchObject({ hubToken: 'hf_x', modelDirs: ['/m'] });
    expect(engineOptionsFromEnv({}).runtime).toMatchObject({ returnFreedMemory: true });
    expect(() => engineOptionsFromEnv({ SHOAL_PROVIDERS: 'tpu' })).toThrow(/providers/);
  });
});
