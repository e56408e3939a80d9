import * as ort from 'onnxruntime-node';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { thisCpuReport } from '../adapters/quantize/cpu-features.js';
import { readOnnx } from '../adapters/quantize/onnx-file.js';
import { quantizeToCache, type QuantizedGraph, type QuantizeOptionsInput } from '../adapters/quantize/quantized-cache.js';
import { TextTokenizer } from '../adapters/tokenizers/text-tokenizer.js';
import { ceilingBatches, ceilingSessionOptions, measureCeiling } from './lib/ceiling.js';
import { BENCH_MODEL, mixedCorpus } from './lib/corpora.js';
import { markdownTable, median, writeResult, type Row } from './lib/report.js';
import { writeSpladeHeadGraph } from './lib/splade-head.js';

/**
 * Issue 40 item 3: can Shoal's int8 graph beat onnxruntime's dynamic quantization, and how far
 * is 2.4× the fp32 ceiling? Each structural rewrite is measured alone and together, all raw
 * onnxruntime on the mixed corpus (bench/lib/ceiling.ts: pre-tokenized, length-sorted batches,
 * one token budget, interleaved rounds with the order rotating):
 *
 *   dynamic        every constant-weight MatMul as DynamicQuantizeMatMul (Shoal's int8 before /3)
 *   merged         + sibling projections (Q/K/V) in one node (merge-projections.ts)
 *   fused          + eager attention as MultiHeadAttention (fuse-attention.ts), no merge
 *   merged+fused   both
 *
 * Each variant's outputs are compared with `dynamic`'s over every batch of one untimed pass
 * (largest |Δ| at real token positions: the rewrites are meant to change no number).
 *
 * Then where the time goes: one profiled pass (onnxruntime's profiler, per-node kernel time) of
 * fp32 and `dynamic`, split into projections (the nodes the int8 rewrite quantizes, by name),
 * attention (nodes named under `/self/` or `/attention/` that are not projections: QKᵀ, scale,
 * mask, softmax, ·V, head transposes) and the rest (LayerNorm, GELU, residual adds, embeddings).
 * From it, the bound: int8 / fp32 if the projections ran at 4× their fp32 time (AVX-512 VNNI's
 * VPDPBUSD does 64 u8·s8 products per instruction against 16 fp32 FMAs: the int8 GEMM's peak
 * advantage, without AMX) with every float op unchanged.
 *
 * Other models (issue 40 asks for the cross-encoder and SPLADE): `--model DIR` measures that
 * folder's `onnx/model.onnx` with its tokenizer on the same corpus (speed depends on the token
 * shapes only, so single texts stand in for pairs); `--splade-head` puts BERT's 30,522-term
 * masked-LM head on the model's encoder first (bench/lib/splade-head.ts: a SPLADE graph at the
 * encoder's real size, random head weights); `--min-weight-elements N` lowers the quantizer's
 * floor (16,384: the kit's 32-wide graphs have no weight that large); `--pool` with `--splade-head`
 * appends SpladePooling to the graph as Shoal does when it loads a SPLADE model ([batch, vocab]
 * weights out instead of [batch, sequence, vocab] logits).
 *
 *   npx tsx bench/int8-graph.ts [--rounds 5] [--items 1600] [--threads 2] [--budget 1024]
 *     [--weights auto|int8|uint8] [--profile-items 800] [--model DIR] [--splade-head [--pool]]
 *     [--min-weight-elements N] [--out result.json]
 */

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    items: { type: 'string', default: '1600' },
    threads: { type: 'string', default: '2' },
    budget: { type: 'string', default: '1024' },
    weights: { type: 'string', default: 'auto' },
    'profile-items': { type: 'string', default: '800' },
    model: { type: 'string', default: BENCH_MODEL },
    'splade-head': { type: 'boolean', default: false },
    /** With --splade-head: SpladePooling inside the graph (adapters/quantize/splade-pooling.ts), as Shoal loads SPLADE models. */
    pool: { type: 'boolean', default: false },
    'min-weight-elements': { type: 'string' },
    out: { type: 'string' },
  },
});

const ROUNDS = Number(args.rounds);
const THREADS = Number(args.threads);
const BUDGET = Number(args.budget);
const MAX_LENGTH = 256;
const VNNI_PEAK = 4;
const cpu = thisCpuReport();
const WEIGHTS = z.enum(['auto', 'int8', 'uint8']).parse(args.weights);
const weights = WEIGHTS === 'auto' ? cpu.weightFormat : WEIGHTS;
const MODEL = args.model;
const MIN_WEIGHT_ELEMENTS = args['min-weight-elements'] === undefined ? {} : { minWeightElements: Number(args['min-weight-elements']) };

const VARIANTS = {
  dynamic: { mergeProjections: false, fuseAttention: false },
  merged: { mergeProjections: true, fuseAttention: false },
  fused: { mergeProjections: false, fuseAttention: true },
  'merged+fused': { mergeProjections: true, fuseAttention: true },
} as const satisfies Record<string, QuantizeOptionsInput>;
type Variant = keyof typeof VARIANTS;
const VARIANT_NAMES = Object.keys(VARIANTS) as Variant[];
/** `fp32 logits`: with --splade-head --pool, the same head graph unpooled (how Shoal ran SPLADE before pooling in the graph). */
type Graph = 'fp32' | 'fp32 logits' | Variant;
const GRAPHS: readonly Graph[] = args['splade-head'] && args.pool ? ['fp32 logits', 'fp32', ...VARIANT_NAMES] : ['fp32', ...VARIANT_NAMES];
const isVariant = (graph: Graph): graph is Variant => graph !== 'fp32' && graph !== 'fp32 logits';


/** Largest |variant − dynamic| at real token positions (every value of a pooled output) over one pass. */
async function largestDifference(paths: Record<Graph, string>, ids: readonly number[][]): Promise<Record<Variant, number>> {
  const sessions = {} as Record<Variant, ort.InferenceSession>;
  for (const v of VARIANT_NAMES) sessions[v] = await ort.InferenceSession.create(paths[v], ceilingSessionOptions(THREADS));
  const worst = Object.fromEntries(VARIANT_NAMES.map((v) => [v, 0])) as Record<Variant, number>;
  try {
    for (const { feeds, lengths, width } of ceilingBatches(ids, BUDGET)) {
      const out = {} as Record<Variant, Float32Array>;
      for (const v of VARIANT_NAMES) {
        const tensor = (await sessions[v].run(feeds))[sessions[v].outputNames[0] ?? ''];
        if (tensor === undefined || !(tensor.data instanceof Float32Array)) throw new Error(`${v}: no float output`);
        out[v] = tensor.data;
      }
      // A pooled graph ([rows, vocab]) has nothing at padded positions: every value counts.
      const pooled = out.dynamic.length % (lengths.length * width) !== 0 || args.pool;
      const hidden = pooled ? 0 : out.dynamic.length / (lengths.length * width);
      for (const v of VARIANT_NAMES) {
        if (pooled) {
          for (let i = 0; i < out.dynamic.length; i++) worst[v] = Math.max(worst[v], Math.abs((out[v][i] ?? 0) - (out.dynamic[i] ?? 0)));
          continue;
        }
        lengths.forEach((length, row) => {
          for (let i = row * width * hidden; i < (row * width + length) * hidden; i++) worst[v] = Math.max(worst[v], Math.abs((out[v][i] ?? 0) - (out.dynamic[i] ?? 0)));
        });
      }
    }
  } finally {
    for (const s of Object.values(sessions)) await s.release();
  }
  return worst;
}

const ProfileEvent = z.looseObject({ cat: z.string(), name: z.string(), dur: z.number(), args: z.looseObject({ op_name: z.string().optional() }).optional() });

interface Breakdown {
  totalMs: number;
  projectionsMs: number;
  attentionMs: number;
  otherMs: number;
  byOp: Record<string, number>;
}

/** One profiled pass of `graph`; kernel time split as the header says. */
async function profile(graph: string, ids: readonly number[][], projectionNames: ReadonlySet<string>, workDir: string, tag: string): Promise<Breakdown> {
  const prefix = join(workDir, `profile-${tag}`);
  const session = await ort.InferenceSession.create(graph, { ...ceilingSessionOptions(THREADS), enableProfiling: true, profileFilePrefix: prefix });
  for (const { feeds } of ceilingBatches(ids, BUDGET)) await session.run(feeds);
  session.endProfiling();
  await session.release();
  const file = readdirSync(workDir).filter((f) => f.startsWith(`profile-${tag}`)).sort().at(-1);
  if (file === undefined) throw new Error(`no profile written for ${tag}`);
  const events = z.array(ProfileEvent).parse(JSON.parse(readFileSync(join(workDir, file), 'utf8')));
  const out: Breakdown = { totalMs: 0, projectionsMs: 0, attentionMs: 0, otherMs: 0, byOp: {} };
  for (const event of events) {
    if (event.cat !== 'Node' || !event.name.endsWith('_kernel_time')) continue;
    const node = event.name.slice(0, -'_kernel_time'.length);
    const op = event.args?.op_name ?? '?';
    const ms = event.dur / 1000;
    out.totalMs += ms;
    out.byOp[op] = (out.byOp[op] ?? 0) + ms;
    if (projectionNames.has(node) || op === 'DynamicQuantizeMatMul') out.projectionsMs += ms;
    else if (/\/(self|attention)\//.test(node) || op === 'Softmax' || op === 'MultiHeadAttention') out.attentionMs += ms;
    else out.otherMs += ms;
  }
  return out;
}

async function main(): Promise<void> {
  const texts = mixedCorpus(Number(args.items));
  const tokenizer = await TextTokenizer.load(MODEL);
  const ids = texts.map((text) => tokenizer.encode(text, { maxLength: MAX_LENGTH }).ids);
  const load = loadavg()[0] ?? 0;
  const workDir = mkdtempSync(join(tmpdir(), 'shoal-int8-graph-'));
  const cacheDir = join(workDir, 'quantized');
  mkdirSync(cacheDir, { recursive: true });
  try {
    let fp32Path = join(MODEL, 'onnx', 'model.onnx');
    let logitsPath = fp32Path;
    if (args['splade-head']) {
      logitsPath = join(workDir, 'splade-head-logits.onnx');
      await writeSpladeHeadGraph(fp32Path, logitsPath);
      fp32Path = logitsPath;
      if (args.pool) {
        fp32Path = join(workDir, 'splade-head-pooled.onnx');
        await writeSpladeHeadGraph(join(MODEL, 'onnx', 'model.onnx'), fp32Path, { pool: true });
      }
    }
    const built = {} as Record<Variant, QuantizedGraph>;
    for (const v of VARIANT_NAMES) built[v] = await quantizeToCache({ source: fp32Path, cacheDir, options: { weights, ...MIN_WEIGHT_ELEMENTS, ...VARIANTS[v] } });
    const paths = { fp32: fp32Path, 'fp32 logits': logitsPath, ...Object.fromEntries(VARIANT_NAMES.map((v) => [v, built[v].path])) } as Record<Graph, string>;
    const difference = await largestDifference(paths, ids.slice(0, 400));
    process.stderr.write(`largest |Δ| against dynamic: ${VARIANT_NAMES.map((v) => `${v} ${difference[v]}`).join(', ')}\n`);

    const perRound = Object.fromEntries(GRAPHS.map((g) => [g, [] as number[]])) as Record<Graph, number[]>;
    for (let round = 0; round < ROUNDS; round++) {
      const order = GRAPHS.map((_, k) => GRAPHS[(k + round) % GRAPHS.length] ?? 'fp32');
      for (const graph of order) {
        const [result] = await measureCeiling(MODEL, ids, [BUDGET], THREADS, paths[graph]);
        if (result === undefined) throw new Error('no ceiling result');
        perRound[graph].push(result.tokensPerSecond);
      }
      process.stderr.write(`round ${round + 1}/${ROUNDS}: ${GRAPHS.map((g) => `${g} ${Math.round(perRound[g].at(-1) ?? 0)}`).join(', ')} tok/s\n`);
    }
    const ratio = (a: Graph, b: Graph): number => median(perRound[a].map((t, r) => t / (perRound[b][r] ?? t)));

    // Which nodes are projections: the ones the int8 rewrite turned into DynamicQuantizeMatMul (same names in fp32).
    const { model: dynamicModel } = await readOnnx(paths.dynamic);
    const projectionNames = new Set((dynamicModel.graph?.node ?? []).filter((n) => n.opType === 'DynamicQuantizeMatMul').map((n) => n.name ?? ''));
    const profileIds = ids.slice(0, Number(args['profile-items']));
    const fp32 = await profile(paths.fp32, profileIds, projectionNames, workDir, 'fp32');
    const dynamic = await profile(paths.dynamic, profileIds, projectionNames, workDir, 'dynamic');
    const projectionSpeedup = fp32.projectionsMs / dynamic.projectionsMs;
    const floatMs = dynamic.totalMs - dynamic.projectionsMs;
    const boundAtPeak = fp32.totalMs / (floatMs + fp32.projectionsMs / VNNI_PEAK);
    const boundFree = fp32.totalMs / floatMs;

    const rows: Row[] = GRAPHS.map((graph) => ({
      graph,
      'median tok/s': Math.round(median(perRound[graph])),
      '× fp32 ceiling (median of rounds)': graph === 'fp32' ? '1' : ratio(graph, 'fp32').toFixed(3),
      '× dynamic': graph === 'fp32' ? '' : ratio(graph, 'dynamic').toFixed(3),
      'largest |Δ| vs dynamic': isVariant(graph) ? String(difference[graph]) : '',
      rounds: perRound[graph].map((t) => Math.round(t)).join(' '),
    }));
    const split = (b: Breakdown): Row => ({
      'total ms': Math.round(b.totalMs),
      'projections ms': `${Math.round(b.projectionsMs)} (${((100 * b.projectionsMs) / b.totalMs).toFixed(0)} %)`,
      'attention ms': `${Math.round(b.attentionMs)} (${((100 * b.attentionMs) / b.totalMs).toFixed(0)} %)`,
      'other ms': `${Math.round(b.otherMs)} (${((100 * b.otherMs) / b.totalMs).toFixed(0)} %)`,
    });
    const loadAverage = { start: Number(load.toFixed(2)), end: Number((loadavg()[0] ?? 0).toFixed(2)) };
    const data = {
      bench: 'int8-graph',
      model: MODEL,
      spladeHead: args['splade-head'],
      pooledInGraph: args['splade-head'] && args.pool,
      minWeightElements: MIN_WEIGHT_ELEMENTS.minWeightElements ?? null,
      items: texts.length,
      rounds: ROUNDS,
      threads: THREADS,
      budget: BUDGET,
      maxLength: MAX_LENGTH,
      weights,
      loadAverage,
      cpu,
      graphs: Object.fromEntries(
        GRAPHS.map((g) => [
          g,
          {
            medianTokensPerSecond: Math.round(median(perRound[g])),
            tokensPerSecondPerRound: perRound[g].map((t) => Math.round(t)),
            ratioToFp32: Number(ratio(g, 'fp32').toFixed(4)),
            ...(isVariant(g) ? { ratioToDynamic: Number(ratio(g, 'dynamic').toFixed(4)), largestDifference: difference[g], report: built[g].record.report } : {}),
          },
        ]),
      ),
      profile: { items: profileIds.length, fp32, dynamic, projectionSpeedup: Number(projectionSpeedup.toFixed(3)), boundAtVnniPeak: Number(boundAtPeak.toFixed(3)), boundFreeProjections: Number(boundFree.toFixed(3)) },
    };
    console.log(`\n${MODEL}${args['splade-head'] ? ` + SPLADE head${args.pool ? ', pooled in the graph' : ''}` : ''}; ${cpu.int8Kernel}; weights ${weights}; ${texts.length} mixed items, ${ROUNDS} interleaved rounds, ${THREADS} threads, budget ${BUDGET}, load ${loadAverage.start} → ${loadAverage.end}\n`);
    console.log(markdownTable(rows));
    console.log(`\nkernel time, one profiled pass over ${profileIds.length} items:\n`);
    console.log(markdownTable([{ graph: 'fp32', ...split(fp32) }, { graph: 'int8 dynamic', ...split(dynamic) }]));
    console.log(
      `\nprojections: int8 ${projectionSpeedup.toFixed(2)}× their fp32 time; int8 / fp32 if they ran at the ${VNNI_PEAK}× VNNI peak, float ops unchanged: ` +
        `${boundAtPeak.toFixed(2)}×; if they cost nothing: ${boundFree.toFixed(2)}×`,
    );
    console.log(`\n${writeResult('int8-graph', data, args.out)}`);
  } finally {
    rmSync(workDir, { recursive: true, force: true });
  }
}

await main();
