import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { connectNats } from '../adapters/nats/connection/connection.js';
import { NatsEngine } from '../adapters/nats/rpc/engine-client.js';
import { JobsClient } from '../adapters/nats/jobs/jobs-client.js';
import { createLogger } from '../adapters/observability/logger.js';
import { canReturnFreedMemory } from '../adapters/runtime/native-memory.js';
import { loadCatalog } from '../pipelines/inference/catalog.js';
import { InferenceEngine } from '../pipelines/inference/engine.js';
import { resolveWorkerConfig } from '../services/worker/config.js';
import { ShoalWorker } from '../services/worker/worker.js';
import type { BatchEvent } from '../pipelines/inference/scheduler-options.js';
import { freePort, startNatsServer } from '../test/helpers/nats-server.js';

/**
 * What NATS adds on top of the in-process engine, measured in one run on one machine with
 * bench-minilm-l6 (../shared/conformance) and a private nats-server:
 * - request-reply latency: single-query encodes, NatsEngine → worker (interactive lane) vs
 *   engine.encode in-process, calls interleaved one by one; p50/p95 and the added p50
 *   (target ≤ 2 ms);
 * - bulk throughput: one job of N SciFact titles (or passages) through JetStream (submit → parts pulled by
 *   the worker → results published → status completed) vs one in-process bulk encode of the same
 *   items, rounds interleaved (ABBA); items/s and their ratio (target ≥ 0.95), and CPU seconds per
 *   1000 items of each path (steadier than wall time on a machine shared with other work), and how
 *   the bulk batches were packed on each path (batches, items per batch, padded / real tokens;
 *   the worker's from its /metrics).
 * The worker runs as deployed: a `shoal worker` process of its own (compiled dist/, built first),
 * configured like the in-process engine; `--worker inline` runs it inside this process instead
 * (its event loop then shares this process's thread with the client). CPU figures count this
 * process, the worker process and nats-server.
 *
 *   npx tsx bench/nats.ts [--items 4000] [--rounds 4] [--calls 300] [--part-items 64]
 *                         [--concurrency 32] [--text title|passage] [--threads N] [--out result.json]
 *                         [--worker process|inline]
 *
 * Prints a table on stderr and the JSON result on stdout (and into --out).
 */

const HERE = fileURLToPath(new URL('.', import.meta.url));
const SHARED = process.env.SHOAL_SHARED_DIR ?? resolve(HERE, '..', '..', 'shared');
const MODEL_DIR = join(SHARED, 'conformance', 'bench-minilm-l6');
const DATA = join(SHARED, 'data', 'scifact');
const MODEL = 'minilm';

const { values: args } = parseArgs({
  options: {
    items: { type: 'string', default: '4000' },
    rounds: { type: 'string', default: '4' },
    calls: { type: 'string', default: '300' },
    'part-items': { type: 'string', default: '64' },
    concurrency: { type: 'string', default: '32' },
    text: { type: 'string', default: 'title' },
    threads: { type: 'string' },
    out: { type: 'string' },
    worker: { type: 'string', default: 'process' },
  },
});

const Doc = z.looseObject({ title: z.string(), text: z.string() });
const Query = z.looseObject({ text: z.string() });

function jsonl<T>(file: string, schema: z.ZodType<T>): T[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => schema.parse(JSON.parse(line)));
}

/** SciFact titles (about 20 tokens: NATS overhead weighs most) or whole passages (up to the model's 256). */
function corpus(count: number, kind: string): string[] {
  const docs = jsonl(join(DATA, 'corpus.jsonl'), Doc);
  return Array.from({ length: count }, (_, i) => {
    const doc = docs[i % docs.length];
    return kind === 'passage' ? `${doc?.title ?? ''} ${doc?.text ?? ''}` : (doc?.title ?? '');
  });
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const at = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[at] ?? Number.NaN;
}

/** CPU seconds used so far by this process (all its threads) and by the other processes (nats-server, a worker; Linux /proc; 0 elsewhere). */
function cpuSample(pids: readonly (number | null)[]): { process: NodeJS.CpuUsage; others: number } {
  return { process: process.cpuUsage(), others: othersCpu(pids) };
}

function othersCpu(pids: readonly (number | null)[]): number {
  return pids.reduce<number>((sum, pid) => sum + processCpu(pid), 0);
}

function processCpu(pid: number | null): number {
  if (pid === null) return 0;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return (Number(fields[11] ?? 0) + Number(fields[12] ?? 0)) / 100;
  } catch {
    return 0;
  }
}

function cpuSince(sample: { process: NodeJS.CpuUsage; others: number }, pids: readonly (number | null)[]): number {
  const used = process.cpuUsage(sample.process);
  return (used.user + used.system) / 1e6 + (othersCpu(pids) - sample.others);
}

/** Bulk-lane batches run by one engine: how well the scheduler packed them. */
interface BatchTally {
  batches: number;
  items: number;
  realTokens: number;
  paddedTokens: number;
}

const emptyTally = (): BatchTally => ({ batches: 0, items: 0, realTokens: 0, paddedTokens: 0 });

function tallyDelta(after: BatchTally, before: BatchTally): BatchTally {
  return {
    batches: after.batches - before.batches,
    items: after.items - before.items,
    realTokens: after.realTokens - before.realTokens,
    paddedTokens: after.paddedTokens - before.paddedTokens,
  };
}

/** The worker's bulk batches so far, from its Prometheus endpoint. */
async function scrapeTally(metricsPort: number): Promise<BatchTally> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const sum = (name: string, ...labels: string[]): number =>
    text
      .split('\n')
      .filter((line) => line.startsWith(`${name}{`) && labels.every((label) => line.includes(label)))
      .reduce((total, line) => total + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
  return {
    batches: sum('shoal_batches_total', 'lane="bulk"'),
    items: sum('shoal_batch_items_total', 'lane="bulk"'),
    realTokens: sum('shoal_batch_tokens_total', 'lane="bulk"', 'kind="real"'),
    paddedTokens: sum('shoal_batch_tokens_total', 'lane="bulk"', 'kind="padded"'),
  };
}

interface BenchWorker {
  pid: number | null;
  /** Bulk batches the worker has run so far (null when it cannot tell: --worker inline). */
  tally(): Promise<BatchTally | null>;
  stop(): Promise<void>;
}

/** `shoal worker` in a process of its own, from the compiled sources, as it is deployed. */
async function workerProcess(serverUrl: string, catalogFile: string, threads: number | null): Promise<BenchWorker> {
  const root = fileURLToPath(new URL('../', import.meta.url));
  const build = spawnSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit' });
  if (build.status !== 0) throw new Error('npm run build failed; run with --worker inline to keep the worker in this process');
  const argv = [join(root, 'bin', 'shoal.js'), '--catalog', catalogFile, ...(threads === null ? [] : ['--threads', String(threads)]), 'worker'];
  const metricsPort = await freePort();
  argv.push('--nats', serverUrl, '--prefix', 'bench', '--models', MODEL, '--preload', MODEL, '--concurrency', args.concurrency ?? '32');
  argv.push('--metrics-port', String(metricsPort));
  const child: ChildProcess = spawn(process.execPath, argv, {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, SHOAL_FROM_SOURCE: '0', SHOAL_LOG_LEVEL: 'warn', ...(canReturnFreedMemory() ? {} : { MALLOC_TRIM_THRESHOLD_: '0' }) },
  });
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  // Without the malloc_trim addon, bin/shoal.js re-executes itself with MALLOC_TRIM_THRESHOLD_ set
  // unless it is already set; setting it here then keeps one process, so its pid is the one whose
  // CPU is counted. (With the addon neither process sets it: both engines run on glibc's defaults.)
  return {
    pid: child.pid ?? null,
    tally: () => scrapeTally(metricsPort),
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

async function inlineWorker(serverUrl: string, catalogFile: string, threads: number | null): Promise<BenchWorker> {
  const worker = await ShoalWorker.start(
    resolveWorkerConfig({
      nats: { servers: [serverUrl] },
      topology: { prefix: 'bench' },
      engine: { catalog: catalogFile, threads },
      models: [MODEL],
      preload: [MODEL],
      concurrency: Number(args.concurrency),
    }),
    { logger: createLogger('bench', 'warn') },
  );
  return { pid: null, tally: () => Promise.resolve(null), stop: () => worker.drain() };
}

/** Waits until the worker answers a request on the model (it has loaded it). */
async function answering(remote: NatsEngine, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      await remote.encode({ model: MODEL, items: ['ready?'] });
      return;
    } catch (error) {
      if (performance.now() > deadline) throw error;
      await new Promise((wait) => setTimeout(wait, 200));
    }
  }
}

const median = (values: readonly number[]): number => percentile(values, 50);

function batchSummary(rounds: readonly BatchTally[]): { batches: number; itemsPerBatch: number; paddedPerReal: number } | null {
  if (rounds.length === 0) return null;
  return {
    batches: Math.round(median(rounds.map((r) => r.batches))),
    itemsPerBatch: Math.round(median(rounds.map((r) => r.items / r.batches)) * 10) / 10,
    paddedPerReal: Math.round(median(rounds.map((r) => r.paddedTokens / r.realTokens)) * 1000) / 1000,
  };
}

function describeBatches(summary: ReturnType<typeof batchSummary>): string {
  return summary === null ? 'n/a' : `${summary.batches} × ${summary.itemsPerBatch} items, padded/real ${summary.paddedPerReal}`;
}
const round2 = (x: number): number => Math.round(x * 100) / 100;

async function main(): Promise<void> {
  const threads = args.threads === undefined ? null : Number(args.threads);
  const rounds = Number(args.rounds);
  const items = corpus(Number(args.items), args.text);
  const queries = jsonl(join(DATA, 'queries.jsonl'), Query).map((q) => q.text);
  const calls = Number(args.calls);
  const partItems = Number(args['part-items']);
  const work = mkdtempSync(join(tmpdir(), 'shoal-nats-bench-'));
  const catalogFile = join(work, 'catalog.json');
  writeFileSync(catalogFile, JSON.stringify({ models: { [MODEL]: { source: MODEL_DIR } } }));
  const server = await startNatsServer();
  const load = loadavg()[0] ?? 0;
  const localTally = emptyTally();
  const countBatch = (event: BatchEvent): void => {
    if (event.lane !== 'bulk') return;
    localTally.batches += 1;
    localTally.items += event.items;
    localTally.realTokens += event.realTokens;
    localTally.paddedTokens += event.paddedTokens;
  };
  const local = new InferenceEngine({
    catalog: await loadCatalog(catalogFile),
    runtime: threads === null ? {} : { intraOpThreads: threads },
    preload: [MODEL],
    hooks: { scheduler: { onBatch: countBatch } },
  });
  if (args.worker !== 'process' && args.worker !== 'inline') throw new Error(`--worker is process or inline, not ${args.worker}`);
  const worker = args.worker === 'process' ? await workerProcess(server.url, catalogFile, threads) : await inlineWorker(server.url, catalogFile, threads);
  const pids = [server.pid(), worker.pid];
  const nc = await connectNats({ servers: [server.url], retryFirstConnect: false });
  const remote = new NatsEngine(nc, { prefix: 'bench' });
  const jobs = await JobsClient.open(nc, { topology: { prefix: 'bench' }, partItems });
  try {
    await local.start();
    await answering(remote, 120_000);
    // Warm up both paths (interactive sessions, JIT, first batches).
    for (let i = 0; i < 20; i++) {
      await local.encode({ model: MODEL, items: [queries[i] ?? 'q'], priority: 'interactive' });
      await remote.encode({ model: MODEL, items: [queries[i] ?? 'q'] });
    }
    // One whole bulk round on each path before measuring: a freshly started worker process keeps
    // getting faster over its first thousands of items (JIT, allocator, pull pipeline), which
    // measured rounds would otherwise charge to NATS.
    const warm = await jobs.submit({ primitive: 'encode', request: { model: MODEL, items } });
    await jobs.wait(warm.job_id, { timeoutMs: 600_000 });
    await local.encode({ model: MODEL, items, priority: 'bulk' });

    const localMs: number[] = [];
    const natsMs: number[] = [];
    /** The worker's own time per call (reply header Shoal-Worker-Ms), and the rest: client, nats-server, both hops. */
    const workerMs: number[] = [];
    const transportMs: number[] = [];
    /** A round trip to the same worker that runs no model: its discovery subject. */
    const bareMs: number[] = [];
    for (let i = 0; i < calls; i++) {
      const t0 = performance.now();
      await nc.request(remote.names.workers(), new Uint8Array(0), { timeout: 5000 });
      bareMs.push(performance.now() - t0);
      const request = { model: MODEL, items: [queries[i % queries.length] ?? 'q'] };
      let t = performance.now();
      await local.encode({ ...request, priority: 'interactive' });
      localMs.push(performance.now() - t);
      t = performance.now();
      const call = await remote.call('encode', request);
      const total = performance.now() - t;
      natsMs.push(total);
      if (call.workerMs !== null) {
        workerMs.push(call.workerMs);
        transportMs.push(total - call.workerMs);
      }
    }

    const localRate: number[] = [];
    const natsRate: number[] = [];
    const localCpu: number[] = [];
    const natsCpu: number[] = [];
    /** CPU seconds per 1000 items of each process on the NATS path: where the extra CPU goes. */
    const natsSplit: { client: number; worker: number; natsServer: number }[] = [];
    /** Bulk batches of each round on each path: different packing (padding, batch sizes) changes the work itself. */
    const localBatches: BatchTally[] = [];
    const natsBatches: BatchTally[] = [];
    const runLocal = async (): Promise<void> => {
      const sample = cpuSample(pids);
      const tally = { ...localTally };
      const t = performance.now();
      await local.encode({ model: MODEL, items, priority: 'bulk' });
      localBatches.push(tallyDelta(localTally, tally));
      localRate.push(items.length / ((performance.now() - t) / 1000));
      localCpu.push(cpuSince(sample, pids) / (items.length / 1000));
    };
    const runNats = async (): Promise<void> => {
      const sample = cpuSample(pids);
      const before = { server: processCpu(server.pid()), worker: processCpu(worker.pid) };
      const tally = await worker.tally();
      const t = performance.now();
      const job = await jobs.submit({ primitive: 'encode', request: { model: MODEL, items } });
      const status = await jobs.wait(job.job_id, { timeoutMs: 600_000 });
      if (status.state !== 'completed') throw new Error(`bench job ended ${status.state}`);
      natsRate.push(items.length / ((performance.now() - t) / 1000));
      const after = await worker.tally();
      if (tally !== null && after !== null) natsBatches.push(tallyDelta(after, tally));
      natsCpu.push(cpuSince(sample, pids) / (items.length / 1000));
      const own = process.cpuUsage(sample.process);
      const per1000 = items.length / 1000;
      natsSplit.push({
        client: (own.user + own.system) / 1e6 / per1000,
        worker: (processCpu(worker.pid) - before.worker) / per1000,
        natsServer: (processCpu(server.pid()) - before.server) / per1000,
      });
    };
    // ABBA order: a machine whose load drifts during the run favours neither side.
    for (let r = 0; r < rounds; r++) {
      if (r % 2 === 0) {
        await runLocal();
        await runNats();
      } else {
        await runNats();
        await runLocal();
      }
    }

    const result = {
      bench: 'nats',
      model: 'bench-minilm-l6',
      machine: { cores: availableParallelism(), loadavg1: round2(load), threads: threads ?? 'all' },
      worker: args.worker,
      latency: {
        calls,
        inProcessMs: { p50: round2(median(localMs)), p95: round2(percentile(localMs, 95)) },
        natsMs: { p50: round2(median(natsMs)), p95: round2(percentile(natsMs, 95)) },
        addedP50Ms: round2(median(natsMs) - median(localMs)),
        /** p50 of the worker's own time (receipt to reply) and of the rest of each call. */
        workerMsP50: round2(median(workerMs)),
        bareRoundTripMsP50: round2(median(bareMs)),
        transportMsP50: round2(median(transportMs)),
        targetAddedP50Ms: 2,
      },
      throughput: {
        items: items.length,
        text: args.text,
        rounds,
        partItems,
        concurrency: Number(args.concurrency),
        inProcessItemsPerSecond: Math.round(median(localRate)),
        natsItemsPerSecond: Math.round(median(natsRate)),
        ratio: round2(median(natsRate) / median(localRate)),
        /** Median of each round's NATS/in-process ratio: the two runs of a round share the machine's load at that time. */
        ratioPerRoundMedian: round2(median(natsRate.map((rate, i) => rate / (localRate[i] ?? Number.NaN)))),
        perRound: localRate.map((rate, i) => ({ inProcess: Math.round(rate), nats: Math.round(natsRate[i] ?? 0) })),
        targetRatio: 0.95,
        /** CPU seconds per 1000 items (this process: client, worker, both engines' threads; plus nats-server): less sensitive to other load on the machine. */
        cpuSecondsPer1000Items: { inProcess: round2(median(localCpu)), nats: round2(median(natsCpu)) },
        cpuRatio: round2(median(localCpu) / median(natsCpu)),
        /** The NATS path's CPU per 1000 items by process (with --worker inline the worker's share is in client). */
        /** Bulk batches per round (medians): items per batch and padded / real tokens. */
        batches: { inProcess: batchSummary(localBatches), nats: batchSummary(natsBatches) },
        natsCpuByProcess: {
          client: round2(median(natsSplit.map((x) => x.client))),
          worker: round2(median(natsSplit.map((x) => x.worker))),
          natsServer: round2(median(natsSplit.map((x) => x.natsServer))),
        },
      },
    };
    const l = result.latency;
    const tp = result.throughput;
    process.stderr.write(
      [
        `NATS vs in-process, bench-minilm-l6, worker ${result.worker}, ${result.machine.cores} cores, load ${result.machine.loadavg1}`,
        `                         in-process        NATS`,
        `latency p50 (ms)         ${String(l.inProcessMs.p50).padEnd(18)}${l.natsMs.p50}   added ${l.addedP50Ms} (target <= 2)`,
        `latency p95 (ms)         ${String(l.inProcessMs.p95).padEnd(18)}${l.natsMs.p95}`,
        `  NATS call p50 split    worker ${l.workerMsP50}, client + nats-server + hops ${l.transportMsP50} (bare round trip to the worker ${l.bareRoundTripMsP50})`,
        `bulk items/s             ${String(tp.inProcessItemsPerSecond).padEnd(18)}${tp.natsItemsPerSecond}   ratio ${tp.ratio}, per-round median ${tp.ratioPerRoundMedian} (target >= 0.95)`,
        `bulk CPU s / 1000 items  ${String(tp.cpuSecondsPer1000Items.inProcess).padEnd(18)}${tp.cpuSecondsPer1000Items.nats}   efficiency ${tp.cpuRatio}`,
        `bulk batches per round   in-process ${describeBatches(tp.batches.inProcess)}; NATS ${describeBatches(tp.batches.nats)}`,
        `  NATS path by process   client ${tp.natsCpuByProcess.client}, worker ${tp.natsCpuByProcess.worker}, nats-server ${tp.natsCpuByProcess.natsServer}`,
        '',
      ].join('\n'),
    );
    const json = `${JSON.stringify(result, null, 2)}\n`;
    process.stdout.write(json);
    if (args.out !== undefined) writeFileSync(args.out, json);
  } finally {
    await worker.stop();
    await nc.close();
    await local.close();
    await server.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
