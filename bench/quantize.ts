import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { parseCatalog } from '../pipelines/inference/catalog.js';
import { BENCH_MODEL, mixedCorpus } from './lib/corpora.js';
import { measurePeer } from './lib/peer.js';
import { InferenceEngine } from '../pipelines/inference/engine.js';

/**
 * int8 vs fp32 throughput of bench-minilm-l6 through the engine, on a mixed corpus from
 * ../shared/data (repeating: a SciFact abstract "title text", a SciFact query, a Flipkart product
 * title, another SciFact query; 1,600 items), both precisions in one invocation with their runs
 * interleaved (so machine load hits both alike); plus cosine(int8, fp32) of every embedding and
 * the resident memory of a process holding each model (measured in separate child processes).
 *
 *   npx tsx bench/quantize.ts [--rounds 5] [--threads N] [--items 1600] [--no-peer] [--out result.json]
 *
 * Also measures the transformers.js peer (fp32) on the same corpus for the int8-Shoal-vs-peer ratio.
 *
 * Prints a table on stderr and the JSON result on stdout (and into --out).
 */

const MODEL_DIR = BENCH_MODEL;

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    threads: { type: 'string' },
    items: { type: 'string', default: '1600' },
    'no-peer': { type: 'boolean', default: false },
    out: { type: 'string' },
    'child-rss': { type: 'string' },
    'cache-dir': { type: 'string' },
  },
});

function engineFor(threads: number | undefined, cacheDir: string): InferenceEngine {
  const catalog = parseCatalog(
    {
      models: {
        'minilm.fp32': { source: MODEL_DIR, precision: 'fp32' },
        'minilm.int8': { source: MODEL_DIR, precision: 'int8' },
      },
    },
    'quantize bench',
  );
  return new InferenceEngine({ catalog, runtime: { cacheDir, ...(threads === undefined ? {} : { intraOpThreads: threads }) } });
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};

function cosine(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  a.forEach((x, i) => {
    const y = b[i] ?? 0;
    dot += x * y;
    na += x * x;
    nb += y * y;
  });
  return dot / Math.sqrt(na * nb);
}

/** Child mode: load one precision, encode a few items, report RSS (the model thread lives in this process). */
async function childRss(precision: string): Promise<void> {
  const before = process.memoryUsage().rss;
  const engine = engineFor(args.threads === undefined ? undefined : Number(args.threads), args['cache-dir'] ?? '');
  const { info } = await engine.inspect(`minilm.${precision}`);
  const loaded = process.memoryUsage().rss;
  await engine.encode({ model: `minilm.${precision}`, items: mixedCorpus(64) });
  const afterBatch = process.memoryUsage().rss;
  process.stdout.write(`${JSON.stringify({ before, loaded, afterBatch, origin: info.precision?.model?.origin ?? null })}\n`);
  await engine.close();
}

const RssReport = z.strictObject({ before: z.number(), loaded: z.number(), afterBatch: z.number(), origin: z.string().nullable() });

function measureRss(precision: string, cacheDir: string): Promise<z.infer<typeof RssReport>> {
  const script = fileURLToPath(import.meta.url);
  const childArgs = [...process.execArgv, script, '--child-rss', precision, '--cache-dir', cacheDir, ...(args.threads === undefined ? [] : ['--threads', args.threads])];
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, childArgs, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.on('error', fail);
    child.on('exit', (code) => {
      if (code !== 0) fail(new Error(`RSS child for ${precision} exited with ${code}`));
      else done(RssReport.parse(JSON.parse(out.trim().split('\n').pop() ?? '{}')));
    });
  });
}

async function main(): Promise<void> {
  const rounds = Number(args.rounds);
  const threads = args.threads === undefined ? undefined : Number(args.threads);
  const items = mixedCorpus(Number(args.items));
  const cacheDir = mkdtempSync(join(tmpdir(), 'shoal-quantize-bench-'));
  const load = loadavg()[0] ?? 0;
  const engine = engineFor(threads, cacheDir);
  try {
    const fp32Load = await engine.inspect('minilm.fp32');
    const maxLength = (await engine.profile('minilm.fp32')).maxLength;
    const int8Load = await engine.inspect('minilm.int8');
    const precision = int8Load.info.precision?.model;
    if (precision?.effective !== 'int8') throw new Error(`int8 was not used: ${JSON.stringify(precision)}`);
    // Warm-up (first runs allocate ORT's arenas).
    for (const model of ['minilm.fp32', 'minilm.int8']) await engine.encode({ model, items: items.slice(0, 128) });

    const seconds: Record<'fp32' | 'int8', number[]> = { fp32: [], int8: [] };
    let tokens = 0;
    let vectors: Record<'fp32' | 'int8', number[][]> = { fp32: [], int8: [] };
    for (let round = 0; round < rounds; round++) {
      for (const p of round % 2 === 0 ? (['fp32', 'int8'] as const) : (['int8', 'fp32'] as const)) {
        const started = performance.now();
        const result = await engine.encode({ model: `minilm.${p}`, items });
        seconds[p].push((performance.now() - started) / 1000);
        tokens = result.usage.tokens;
        vectors = { ...vectors, [p]: result.items.map((item) => item.dense ?? []) };
      }
    }
    const cosines = vectors.fp32.map((v, i) => cosine(v, vectors.int8[i] ?? []));
    const sortedCos = [...cosines].sort((a, b) => a - b);
    const throughput = (p: 'fp32' | 'int8') => ({
      medianTokensPerSecond: Math.round(tokens / median(seconds[p])),
      bestTokensPerSecond: Math.round(tokens / Math.min(...seconds[p])),
      seconds: seconds[p].map((s) => Number(s.toFixed(3))),
    });
    const fp32 = throughput('fp32');
    const int8 = throughput('int8');
    // The pool's own view: bytes predicted before each load and RSS growth measured over it.
    const poolMemory = Object.fromEntries(
      (['fp32', 'int8'] as const).map((p) => {
        const entry = engine.models().models.find((m) => m.name === `minilm.${p}`);
        return [p, { predictedMB: entry?.predictedBytes == null ? null : Math.round(entry.predictedBytes / 1e6), measuredMB: entry?.measuredBytes == null ? null : Math.round(entry.measuredBytes / 1e6) }];
      }),
    );
    await engine.close();
    // The peer on fp32 (transformers.js feature-extraction as its docs show), same corpus and
    // thread count, after the engine has closed so the two never share the cores.
    // Truncating where Shoal does (the profile's max length, 256 for bench-minilm-l6).
    const peer = args['no-peer'] ? undefined : await measurePeer(MODEL_DIR, items, tokens, threads ?? availableParallelism(), maxLength);
    const peerTokensPerSecond = peer === undefined ? undefined : Math.round(peer.tokensPerSecond);
    const rss = { fp32: await measureRss('fp32', cacheDir), int8: await measureRss('int8', cacheDir) };
    const mb = (bytes: number): number => Math.round(bytes / 1e6);
    const result = {
      model: 'bench-minilm-l6',
      items: items.length,
      tokens,
      rounds,
      cores: availableParallelism(),
      intraOpThreads: threads ?? availableParallelism(),
      loadAverage: { start: Number(load.toFixed(2)), end: Number((loadavg()[0] ?? 0).toFixed(2)) },
      fp32,
      int8,
      speedup: {
        // fp32 time / int8 time of the same round: the two runs of a round see about the same machine load.
        pairedMedian: Number(median(seconds.fp32.map((t, r) => t / (seconds.int8[r] ?? t))).toFixed(2)),
        median: Number((int8.medianTokensPerSecond / fp32.medianTokensPerSecond).toFixed(2)),
        best: Number((int8.bestTokensPerSecond / fp32.bestTokensPerSecond).toFixed(2)),
      },
      peer:
        peerTokensPerSecond === undefined
          ? null
          : {
              fp32TokensPerSecond: peerTokensPerSecond,
              int8ShoalOverPeer: Number((int8.medianTokensPerSecond / peerTokensPerSecond).toFixed(2)),
              fp32ShoalOverPeer: Number((fp32.medianTokensPerSecond / peerTokensPerSecond).toFixed(2)),
            },
      cosine: { min: sortedCos[0], p1: sortedCos[Math.floor(sortedCos.length / 100)], mean: cosines.reduce((a, b) => a + b, 0) / cosines.length },
      quantization: { ...precision, loadMs: Math.round(int8Load.loadMs), fp32LoadMs: Math.round(fp32Load.loadMs) },
      poolMemory,
      rssMB: {
        fp32: { loaded: mb(rss.fp32.loaded - rss.fp32.before), afterBatch: mb(rss.fp32.afterBatch - rss.fp32.before), processTotal: mb(rss.fp32.afterBatch) },
        int8: { loaded: mb(rss.int8.loaded - rss.int8.before), afterBatch: mb(rss.int8.afterBatch - rss.int8.before), processTotal: mb(rss.int8.afterBatch), origin: rss.int8.origin },
      },
    };
    const table = [
      `bench-minilm-l6, ${items.length} mixed items (${tokens} tokens), ${rounds} interleaved rounds, ${result.intraOpThreads} ORT threads, load avg ${result.loadAverage.start} → ${result.loadAverage.end}`,
      'precision | median tok/s | best tok/s | RSS after load (MB over baseline) | after a batch',
      `fp32      | ${fp32.medianTokensPerSecond} | ${fp32.bestTokensPerSecond} | ${result.rssMB.fp32.loaded} | ${result.rssMB.fp32.afterBatch}`,
      `int8      | ${int8.medianTokensPerSecond} | ${int8.bestTokensPerSecond} | ${result.rssMB.int8.loaded} | ${result.rssMB.int8.afterBatch}`,
      `speedup: ${result.speedup.pairedMedian}× (median of per-round ratios), ${result.speedup.median}× (medians), ${result.speedup.best}× (bests); cosine(int8, fp32): min ${result.cosine.min?.toFixed(5)}, p1 ${result.cosine.p1?.toFixed(5)}, mean ${result.cosine.mean.toFixed(5)}`,
      result.peer === null
        ? 'peer: skipped (--no-peer)'
        : `peer (transformers.js fp32, batches of 32): ${result.peer.fp32TokensPerSecond} tok/s; int8 Shoal / peer ${result.peer.int8ShoalOverPeer}×, fp32 Shoal / peer ${result.peer.fp32ShoalOverPeer}×`,
      `pool memory (MB, predicted / measured): fp32 ${poolMemory.fp32?.predictedMB} / ${poolMemory.fp32?.measuredMB}, int8 ${poolMemory.int8?.predictedMB} / ${poolMemory.int8?.measuredMB}`,
      `graph: ${precision.bytes?.source ?? 0} → ${precision.bytes?.quantized ?? 0} bytes, ${precision.rewritten ?? 0} matmuls int8, built in ${precision.quantizeMs ?? 0} ms (fidelity gate min cosine ${precision.fidelity?.minCosine.toFixed(5) ?? '?'})`,
    ].join('\n');
    process.stderr.write(`${table}\n`);
    const json = JSON.stringify(result, null, 2);
    process.stdout.write(`${json}\n`);
    if (args.out !== undefined) writeFileSync(args.out, `${json}\n`);
  } finally {
    await engine.close();
    rmSync(cacheDir, { recursive: true, force: true });
  }
}

if (args['child-rss'] !== undefined) await childRss(args['child-rss']);
else await main();
