import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { freePorts } from '../helpers/nats-server.js';
import { FIXTURE_MODELS_DIR, TINY_MEAN } from '../helpers/nats-worker.js';
import { SHOAL_BIN } from '../helpers/shoal-cli.js';
import { CLI_FROM_SOURCE } from '../helpers/cli-build.js';

/**
 * Real `shoal worker` processes and the NATS monitoring endpoint, for the deployment tests
 * (backlog, scale-to-zero). A worker is started as KEDA would start a pod: a fresh process, then
 * stopped with SIGTERM (drain) or killed outright.
 */

export interface WorkerProcess {
  readonly id: string;
  readonly process: ChildProcess;
  /** ms from spawn to the "worker started" log line. */
  readonly startedAfterMs: number;
  readonly spawnedAt: number;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The end of its stderr (JSON log lines). */
  log(): string;
  /** SIGTERM, then waits for the exit (the drain). */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface WorkerProcessOptions {
  url: string;
  prefix: string;
  id: string;
  models?: readonly string[];
  preload?: readonly string[];
  concurrency?: number;
  ackWaitMs?: number;
  metricsPort?: number;
  extraEnv?: Record<string, string>;
}

export async function spawnWorker(options: WorkerProcessOptions): Promise<WorkerProcess> {
  const models = options.models ?? [TINY_MEAN];
  const args = [SHOAL_BIN, '--model-dir', FIXTURE_MODELS_DIR, '--threads', '1', 'worker', '--models', models.join(','), '--nats', options.url];
  args.push('--prefix', options.prefix, '--worker-id', options.id, '--concurrency', String(options.concurrency ?? 4), '--ack-wait', String(options.ackWaitMs ?? 5_000));
  if (options.preload !== undefined && options.preload.length > 0) args.push('--preload', options.preload.join(','));
  if (options.metricsPort !== undefined) args.push('--metrics-port', String(options.metricsPort), '--metrics-host', '127.0.0.1');
  const spawnedAt = performance.now();
  const child = spawn(process.execPath, args, {
    // MALLOC_TRIM_THRESHOLD_ set: bin/shoal.js runs the worker in this very process, so signals reach it directly.
    env: { ...process.env, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, MALLOC_TRIM_THRESHOLD_: '0', SHOAL_LOG_LEVEL: 'info', ...options.extraEnv },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  let log = '';
  const startedAfterMs = await new Promise<number>((resolve, reject) => {
    // Never left running past a failed start: the test would not know to stop it.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`shoal worker ${options.id} did not start within 45 s:\n${log.slice(-3000)}`));
    }, 45_000);
    child.stderr?.on('data', (chunk: Buffer) => {
      log += chunk.toString('utf8');
      if (log.length > 100_000) log = log.slice(-50_000);
      if (process.env.SHOAL_TEST_LOG_LEVEL !== undefined) process.stderr.write(chunk);
      if (log.includes('"worker started"')) {
        clearTimeout(timer);
        resolve(performance.now() - spawnedAt);
      }
    });
    void exited.then(({ code }) => {
      clearTimeout(timer);
      reject(new Error(`shoal worker ${options.id} exited with ${String(code)} before it started:\n${log.slice(-3000)}`));
    });
  });
  return {
    id: options.id,
    process: child,
    startedAfterMs,
    spawnedAt,
    exited,
    log: () => log,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

/** What KEDA's nats-jetstream scaler reads of one consumer in `/jsz`. */
export const JszConsumer = z.looseObject({
  name: z.string(),
  stream_name: z.string(),
  num_pending: z.number(),
  num_ack_pending: z.number(),
  num_redelivered: z.number(),
  delivered: z.looseObject({ consumer_seq: z.number(), stream_seq: z.number() }),
  ack_floor: z.looseObject({ consumer_seq: z.number(), stream_seq: z.number() }),
});
export type JszConsumer = z.infer<typeof JszConsumer>;

const Jsz = z.looseObject({
  account_details: z
    .array(
      z.looseObject({
        name: z.string(),
        stream_detail: z
          .array(z.looseObject({ name: z.string(), state: z.looseObject({ messages: z.number(), last_seq: z.number() }), consumer_detail: z.array(JszConsumer).optional() }))
          .optional(),
      }),
    )
    .optional(),
});

export interface JszStream {
  name: string;
  messages: number;
  lastSeq: number;
  consumers: JszConsumer[];
}

/** The request KEDA's scaler sends (`natsServerMonitoringEndpoint` + this path). */
export function jszUrl(monitorPort: number, account = '$G'): string {
  return `http://127.0.0.1:${monitorPort}/jsz?acc=${encodeURIComponent(account)}&consumers=true&config=true`;
}

export async function readJsz(monitorPort: number, stream: string): Promise<JszStream | null> {
  const response = await fetch(jszUrl(monitorPort));
  const parsed = Jsz.parse(await response.json());
  for (const account of parsed.account_details ?? []) {
    for (const detail of account.stream_detail ?? []) {
      if (detail.name === stream) return { name: detail.name, messages: detail.state.messages, lastSeq: detail.state.last_seq, consumers: detail.consumer_detail ?? [] };
    }
  }
  return null;
}

/** The value of one series in Prometheus text exposition, or null when absent. */
export function sample(text: string, name: string, labels: Record<string, string>): number | null {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const labelText = line.slice(name.length + 1, line.indexOf('}'));
    if (Object.entries(labels).every(([key, value]) => labelText.includes(`${key}="${value}"`))) return Number(line.slice(line.indexOf('}') + 1).trim());
  }
  return null;
}

export interface ShoalProcess {
  readonly process: ChildProcess;
  readonly startedAfterMs: number;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  log(): string;
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Any `shoal` command as a long-running process; resolves once its stderr shows `readyText`. */
export async function spawnShoal(args: readonly string[], readyText: string, env: Record<string, string> = {}, timeoutMs = 40_000): Promise<ShoalProcess> {
  const started = performance.now();
  const child = spawn(process.execPath, [SHOAL_BIN, ...args], {
    env: { ...process.env, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, MALLOC_TRIM_THRESHOLD_: '0', SHOAL_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  let log = '';
  const startedAfterMs = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`shoal ${args.join(' ')} not ready after ${timeoutMs} ms:\n${log.slice(-3000)}`));
    }, timeoutMs);
    child.stderr?.on('data', (chunk: Buffer) => {
      log += chunk.toString('utf8');
      if (log.length > 200_000) log = log.slice(-100_000);
      if (log.includes(readyText)) {
        clearTimeout(timer);
        resolve(performance.now() - started);
      }
    });
    void exited.then(({ code }) => {
      clearTimeout(timer);
      reject(new Error(`shoal ${args.join(' ')} exited with ${String(code)} before it was ready:\n${log.slice(-3000)}`));
    });
  });
  return {
    process: child,
    startedAfterMs,
    exited,
    log: () => log,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

export interface ConfiguredNats {
  url: string;
  monitorPort: number;
  /** The server's log so far (stderr): permission violations are logged there. */
  log(): string;
  stop(): Promise<void>;
}

/** A private nats-server with a configuration file (authorization), JetStream and monitoring. */
export async function startConfiguredNats(bin: string, confText: string, env: Record<string, string>): Promise<ConfiguredNats> {
  const dir = mkdtempSync(join(tmpdir(), 'shoal-nats-conf-'));
  const [port = 0, monitorPort = 0] = await freePorts(2);
  return launchNats(bin, dir, confText, ['-js', '-a', '127.0.0.1', '-p', String(port), '-m', String(monitorPort), '-sd', join(dir, 'store')], port, monitorPort, env);
}

/**
 * A nats-server running a shipped configuration file (deploy/nats/nats.conf) as it is, except
 * for what cannot be the same on this machine: its client and monitoring ports (free ones) and
 * its store folder (a temporary one). Nothing else is given on the command line, so JetStream,
 * the store limit and the users are the file's. A line that is not there to replace fails, so a
 * reshaped file is noticed rather than silently run with other settings.
 */
export async function startShippedNats(bin: string, shippedText: string, env: Record<string, string>): Promise<ConfiguredNats> {
  const dir = mkdtempSync(join(tmpdir(), 'shoal-nats-shipped-'));
  const [port = 0, monitorPort = 0] = await freePorts(2);
  const replace = (text: string, pattern: RegExp, value: string): string => {
    if (!pattern.test(text)) throw new Error(`the shipped NATS configuration has no line ${String(pattern)} to replace`);
    return text.replace(pattern, value);
  };
  let conf = replace(shippedText, /^port: \d+$/m, `port: ${port}`);
  conf = replace(conf, /^http_port: \d+$/m, `http_port: ${monitorPort}`);
  conf = replace(conf, /^(\s*)store_dir: \S+$/m, `$1store_dir: ${JSON.stringify(join(dir, 'store'))}`);
  return launchNats(bin, dir, conf, ['-a', '127.0.0.1'], port, monitorPort, env);
}

async function launchNats(bin: string, dir: string, confText: string, flags: readonly string[], port: number, monitorPort: number, env: Record<string, string>): Promise<ConfiguredNats> {
  const conf = join(dir, 'nats.conf');
  writeFileSync(conf, confText);
  const child = spawn(bin, ['-c', conf, ...flags], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  let output = '';
  await new Promise<void>((resolve, reject) => {
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
      if (output.includes('Server is ready')) resolve();
    });
    void exited.then(() => reject(new Error(`nats-server exited before it was ready:\n${output.slice(-2000)}`)));
  });
  return {
    url: `nats://127.0.0.1:${port}`,
    monitorPort,
    log: () => output,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The sum of every series of `name` whose labels include `labels` (e.g. across lanes). */
export function sampleSum(text: string, name: string, labels: Record<string, string>): number {
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const labelText = line.slice(name.length + 1, line.indexOf('}'));
    if (Object.entries(labels).every(([key, value]) => labelText.includes(`${key}="${value}"`))) total += Number(line.slice(line.indexOf('}') + 1).trim());
  }
  return total;
}
