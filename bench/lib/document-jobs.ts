import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import { connectNats } from '../../adapters/nats/connection/connection.js';
import { LanceDbStore } from '../../adapters/stores/lancedb/store.js';
import type { PipelineDefinition } from '../../pipelines/documents/definition.js';
import { DocumentProducer } from '../../pipelines/documents/document-producer.js';
import type { IngestSummary } from '../../pipelines/documents/runner.js';
import type { PendingSource } from '../../pipelines/documents/sources.js';
import { CLI_FROM_SOURCE } from '../../test/helpers/cli-build.js';
import { freePort, startNatsServer, type NatsServerHandle } from '../../test/helpers/nats-server.js';
import { BENCH_MODEL } from './corpora.js';
import type { Row } from './report.js';

/**
 * The `--jobs` side of bench/ingest.ts: document jobs (issue 35) on a private nats-server, served
 * by real `shoal worker` child processes — one model worker (`--models bench-minilm-l6`, the
 * in-process engine's intra-op threads) and, per configuration, N documents workers
 * (`--documents`). Each configuration has its own pipeline name (`jobs1`, `jobs2`: the same
 * settings) served only by its own documents workers, so the workers of the other configuration
 * sit idle (an idle documents worker only holds a 1 s pull open) and no worker alternates between
 * a busy and an empty pipeline. The bench process is the producer (DocumentProducer, as
 * `shoal ingest --nats --index NAME` uses it): a run is timed from its first publish until the
 * run's end event arrives, and its rows are counted in the index afterwards.
 */

/** Subject prefix of the bench's private server. */
const PREFIX = 'benchjobs';
const MODEL_NAME = basename(BENCH_MODEL);
/** Linux clock ticks per second (`getconf CLK_TCK`), the unit of /proc/PID/stat's CPU times. */
const CLOCK_TICKS = 100;
const CORES = availableParallelism();

export interface JobsFleetOptions {
  /** Documents workers per configuration, e.g. [1, 2]. */
  configurations: readonly number[];
  /** ORT intra-op threads of the model worker (SHOAL_THREADS): the in-process engine's. */
  threads: number;
  /** The in-process run's pipeline: the workers' pipeline files hold the same stages, the model by name. */
  pipeline: PipelineDefinition;
  /** Index names the runs write to (SHOAL_INDEXES is read when a worker starts). */
  indexes: readonly string[];
}

/** CPU seconds per process over one run (user + system, all threads). */
export interface JobsCpu {
  model: number;
  documents: number;
  nats: number;
  bench: number;
}

export interface JobsRun {
  summary: IngestSummary;
  /** First publish → the run's end event. */
  seconds: number;
  /** First publish → the last job published and the run announced. */
  publishSeconds: number;
  rows: number;
  cpu: JobsCpu;
  /** The model worker's batches, their items and tokens (shoal_batches_total, shoal_batch_items_total, shoal_batch_tokens_total). */
  batches: number;
  batchItems: number;
  realTokens: number;
  paddedTokens: number;
  /** Documents each documents worker ended (shoal_documents_total), in start order. */
  perWorker: number[];
}

interface Child {
  process: ChildProcess;
  metricsPort: number;
}

function cpuSeconds(pid: number | null | undefined): number {
  if (pid === null || pid === undefined) return 0;
  try {
    // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}

/** Sum of a Prometheus metric's samples (every label set holding `label`, e.g. `kind="real"`) from a worker's /metrics. */
async function metricSum(port: number, name: string, label = ''): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    if ((line.startsWith(`${name}{`) || line.startsWith(`${name} `)) && line.includes(label)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

async function waitReady(child: Child, what: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.process.exitCode !== null) throw new Error(`${what} exited with ${child.process.exitCode} before it was ready`);
    const ok = await fetch(`http://127.0.0.1:${child.metricsPort}/readyz`).then((response) => response.ok, () => false);
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`${what} not ready after 120 s`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

export class JobsFleet {
  readonly #server: NatsServerHandle;
  readonly #nc: NatsConnection;
  readonly #producer: DocumentProducer;
  readonly #root: string;
  readonly #model: Child;
  readonly #documents: ReadonlyMap<number, readonly Child[]>;
  readonly #table: string;
  #stopping = false;

  private constructor(parts: { server: NatsServerHandle; nc: NatsConnection; producer: DocumentProducer; root: string; model: Child; documents: Map<number, Child[]>; table: string }) {
    this.#server = parts.server;
    this.#nc = parts.nc;
    this.#producer = parts.producer;
    this.#root = parts.root;
    this.#model = parts.model;
    this.#documents = parts.documents;
    this.#table = parts.table;
  }

  static async start(options: JobsFleetOptions): Promise<JobsFleet> {
    const server = await startNatsServer();
    const root = mkdtempSync(join(tmpdir(), 'shoal-bench-jobs-'));
    const pipelines = join(root, 'pipelines');
    mkdirSync(pipelines);
    const { stages } = options.pipeline;
    for (const count of options.configurations) {
      // The in-process run's stages; the model by name (model names over NATS are never paths).
      const definition = { name: `jobs${count}`, stages: { ...stages, encode: { ...stages.encode, model: MODEL_NAME } } };
      writeFileSync(join(pipelines, `jobs${count}.json`), JSON.stringify(definition, null, 2));
    }
    const indexes = options.indexes.map((name) => `${name}=${join(root, 'indexes', name)}`).join(',');
    const spawnWorker = async (args: readonly string[], env: Record<string, string>): Promise<Child> => {
      const metricsPort = await freePort();
      const child = spawn(process.execPath, [join(import.meta.dirname, '..', '..', 'bin', 'shoal.js'), 'worker', ...args, '--nats', server.url, '--prefix', PREFIX, '--metrics-port', String(metricsPort)], {
        cwd: root,
        // dist/ when it is current, else the sources (test/helpers/cli-build.ts).
        env: { ...process.env, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, SHOAL_LOG_LEVEL: 'warn', ...env },
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      return { process: child, metricsPort };
    };
    // Served by name from its folder, with the in-process engine's threads; loaded before any run.
    const model = await spawnWorker(['--models', MODEL_NAME, '--preload', MODEL_NAME], { SHOAL_MODEL_DIR: dirname(BENCH_MODEL), SHOAL_THREADS: String(options.threads) });
    const documents = new Map<number, Child[]>();
    for (const count of options.configurations) {
      const workers: Child[] = [];
      for (let n = 0; n < count; n++) workers.push(await spawnWorker(['--documents', '--pipelines', `jobs${count}`], { SHOAL_PIPELINES: pipelines, SHOAL_INDEXES: indexes }));
      documents.set(count, workers);
    }
    const nc = await connectNats({ servers: [server.url], retryFirstConnect: false });
    const producer = await DocumentProducer.open(nc, { prefix: PREFIX });
    const fleet = new JobsFleet({ server, nc, producer, root, model, documents, table: stages.write.table });
    for (const child of fleet.#children()) {
      child.process.once('exit', (code, signal) => {
        if (fleet.#stopping) return;
        console.error(`a shoal worker exited (${String(code ?? signal)}) during the bench`);
        process.exit(1);
      });
    }
    try {
      await waitReady(model, 'the model worker');
      for (const [count, workers] of documents) for (const [n, worker] of workers.entries()) await waitReady(worker, `documents worker ${n + 1} of configuration ${count}`);
    } catch (error) {
      // No worker is left behind by a fleet that never started.
      await fleet.stop();
      throw error;
    }
    return fleet;
  }

  #children(): Child[] {
    return [this.#model, ...[...this.#documents.values()].flat()];
  }

  /** One run: `sources` as document jobs of configuration `count` into index `index`. */
  async run(count: number, index: string, sources: readonly PendingSource[]): Promise<JobsRun> {
    const workers = this.#documents.get(count);
    if (workers === undefined) throw new Error(`no configuration of ${count} documents workers`);
    const model = this.#model.metricsPort;
    const counters = (): Promise<number[]> => Promise.all([metricSum(model, 'shoal_batches_total'), metricSum(model, 'shoal_batch_items_total'), metricSum(model, 'shoal_batch_tokens_total', 'kind="real"'), metricSum(model, 'shoal_batch_tokens_total', 'kind="padded"'), ...workers.map((worker) => metricSum(worker.metricsPort, 'shoal_documents_total'))]);
    const cpu = (): JobsCpu => {
      const own = process.cpuUsage();
      return {
        model: cpuSeconds(this.#model.process.pid),
        documents: workers.reduce((sum, worker) => sum + cpuSeconds(worker.process.pid), 0),
        nats: cpuSeconds(this.#server.pid()),
        bench: (own.user + own.system) / 1e6,
      };
    };
    const before = await counters();
    const cpuBefore = cpu();
    const runId = randomUUID();
    const started = performance.now();
    const produced = await this.#producer.publish({ runId, pipeline: `jobs${count}`, index, sources });
    const publishSeconds = (performance.now() - started) / 1000;
    const followed = await this.#producer.follow(runId, { expected: produced.documents });
    const seconds = (performance.now() - started) / 1000;
    const cpuAfter = cpu();
    const after = await counters();
    if (followed.end === null) throw new Error(`run ${runId}: no end event`);
    const sink = new LanceDbStore({ dir: join(this.#root, 'indexes', index), table: this.#table });
    let rows: number;
    try {
      rows = await sink.count();
    } finally {
      await sink.close();
    }
    const delta = (at: number): number => (after[at] ?? 0) - (before[at] ?? 0);
    return {
      summary: followed.summary,
      seconds,
      publishSeconds,
      rows,
      cpu: { model: cpuAfter.model - cpuBefore.model, documents: cpuAfter.documents - cpuBefore.documents, nats: cpuAfter.nats - cpuBefore.nats, bench: cpuAfter.bench - cpuBefore.bench },
      batches: delta(0),
      batchItems: delta(1),
      realTokens: delta(2),
      paddedTokens: delta(3),
      perWorker: workers.map((_, n) => delta(4 + n)),
    };
  }

  /** Removes an index the bench has counted (the workers keep their handle; nothing writes it again). */
  removeIndex(index: string): void {
    rmSync(join(this.#root, 'indexes', index), { recursive: true, force: true });
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    this.#producer.close();
    await this.#nc.close();
    await Promise.all(
      this.#children().map(async ({ process: child }) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }),
    );
    await this.#server.stop();
    rmSync(this.#root, { recursive: true, force: true });
  }
}

/** The in-process run of the same round (bench/ingest.ts's PipelineRun). */
export interface InProcessRun {
  summary: IngestSummary;
  seconds: number;
  rows: number;
  batches?: number;
  batchItems?: number;
  realTokens?: number;
  paddedTokens?: number;
  cpuSeconds?: number;
}

const pct = (part: number, whole: number): number => (whole > 0 ? (100 * part) / whole : Number.NaN);

/** One round of one configuration; throws when the two modes did not write the same rows. */
export function jobsRow(round: number, workers: number, local: InProcessRun, run: JobsRun, documents: number): Row {
  const s = run.summary;
  if (s.documents.ok !== documents || local.summary.documents.ok !== documents || run.rows !== local.rows || run.rows !== s.chunks || local.rows !== local.summary.chunks) {
    throw new Error(`round ${round}, ${workers} documents worker(s): jobs ended ${s.documents.ok} of ${documents} documents ok with ${s.chunks} chunks and ${run.rows} rows; in process ${local.summary.documents.ok} ok, ${local.summary.chunks} chunks, ${local.rows} rows`);
  }
  const localRate = local.summary.documents.ok / local.seconds;
  const jobsRate = s.documents.ok / run.seconds;
  const jobsCpu = run.cpu.model + run.cpu.documents + run.cpu.nats + run.cpu.bench;
  return {
    round,
    docs: s.documents.ok,
    'in-process rows': local.rows,
    'jobs rows': run.rows,
    'in-process s': local.seconds,
    'jobs s': run.seconds,
    'publish s': run.publishSeconds,
    'in-process docs/s': localRate,
    'jobs docs/s': jobsRate,
    'in-process chunks/s': local.summary.chunks / local.seconds,
    'jobs chunks/s': s.chunks / run.seconds,
    'jobs/in-process': jobsRate / localRate,
    'in-process items/batch': (local.batchItems ?? Number.NaN) / (local.batches ?? Number.NaN),
    'jobs items/batch': run.batchItems / run.batches,
    // Padding is computed work too: a different batching shows here before it shows in the CPU seconds.
    'in-process padded/real': (local.paddedTokens ?? Number.NaN) / (local.realTokens ?? Number.NaN),
    'jobs padded/real': run.paddedTokens / run.realTokens,
    'in-process cpu s': local.cpuSeconds ?? Number.NaN,
    'jobs cpu s': jobsCpu,
    // Share of all cores' time the processes used: well under 100 % means waiting, not computing.
    'in-process cpu %': pct(local.cpuSeconds ?? Number.NaN, local.seconds * CORES),
    'jobs cpu %': pct(jobsCpu, run.seconds * CORES),
    // What jobs / in-process would be if both kept every core busy: less sensitive to other load on the machine than the wall times.
    'cpu in-process/jobs': (local.cpuSeconds ?? Number.NaN) / jobsCpu,
    'cpu model': run.cpu.model,
    'cpu documents': run.cpu.documents,
    'cpu nats': run.cpu.nats,
    'cpu producer': run.cpu.bench,
    'docs per worker': run.perWorker.join('/'),
  };
}

/** The verdict on a configuration's median row (target: jobs ≥ 0.9 × in process). */
export function jobsVerdict(workers: number, table: readonly Row[]): string {
  const median = table.at(-1);
  const ratio = Number(median?.['jobs/in-process']);
  const rounds = table.slice(0, -1).map((row) => Number(row['jobs/in-process']).toFixed(3));
  const cpu = Number(median?.['cpu in-process/jobs']).toFixed(3);
  return `document jobs with ${workers} documents worker(s) / in process, docs/s (median of ${rounds.length} rounds: ${rounds.join(', ')}): ${ratio.toFixed(3)} — target ≥ 0.9: ${ratio >= 0.9 ? 'met' : 'NOT met'}; CPU seconds in process / jobs (median): ${cpu}`;
}
