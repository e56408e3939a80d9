import * as ort from 'onnxruntime-node';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { thisCpuReport } from '../adapters/quantize/cpu-features.js';
import type { WeightFormat } from '../adapters/quantize/int8-weights.js';
import { quantizeToCache, type QuantizedGraph } from '../adapters/quantize/quantized-cache.js';
import { DEFAULT_MIN_COSINE } from '../adapters/quantize/settings.js';
import { TextTokenizer, type Encoded } from '../adapters/tokenizers/text-tokenizer.js';
import { packBatches } from '../pipelines/inference/batcher.js';
import { ceilingSessionOptions, measureCeiling } from './lib/ceiling.js';
import { BENCH_MODEL, mixedCorpus, queries, SHARED_DIR } from './lib/corpora.js';
import { markdownTable, median, writeResult, type Row } from './lib/report.js';
import { cosine } from '../test/helpers/cosine.js';

/**
 * Which int8 weight storage is faster and exact enough on this CPU (issue 40: the uint8 weights
 * (u8u8 kernel) chosen for AVX2-only CPUs must not cost a VNNI CPU speed, and the int8 weights
 * (u8s8) chosen for VNNI CPUs must not saturate elsewhere: int8-weights.ts WeightFormat). For
 * each model, Shoal's own quantizer builds two int8 graphs into a temporary cache, `weights:
 * uint8` and `weights: int8`, every other option at its default; then, in interleaved rounds (the
 * order rotates each round, so load from elsewhere hits every graph alike), raw onnxruntime
 * (bench/lib/ceiling.ts measureCeiling: pre-tokenized, length-sorted batches, one token budget)
 * runs the fp32 graph and both int8 graphs on the mixed corpus of the other benches (SciFact
 * abstract, query, Flipkart title, query, repeating; 1,600 items, truncated at 256 tokens).
 *
 * Reported per graph: the median tok/s over the rounds, the ratio to fp32 (median of the per-round
 * ratios) and the int8-weights / uint8-weights ratio the same way; and fidelity against fp32 over
 * the whole corpus (one untimed pass): embedders by the cosine of the pooled embedding per item
 * (mean or CLS as the model's 1_Pooling config says, SPLADE by its max-of-log1p(relu) vector;
 * normalization does not change a cosine), mean and min; cross-encoders (a `...ForSequenceClassification`
 * config: each corpus item paired after a SciFact query) by the cosine of the score vector over
 * the corpus (what Shoal's fidelity gate takes for one value per row), the largest score
 * difference and Spearman's rank correlation; any other output by the cosine of each item's raw
 * output row over its real tokens. Also recorded: `thisCpuReport()` (the kernels this CPU lets
 * onnxruntime run) and the format `weights: auto` picks here, and a verdict per model: is the auto
 * pick the fastest of the formats whose min cosine reaches the fidelity floor (`--min-cosine`,
 * default Shoal's gate floor 0.99; the gate itself measures calibration inputs, not this corpus)?
 *
 *   npx tsx bench/weight-formats.ts [--models bench-minilm-l6,bert-cross-encoder,bert-splade]
 *     [--rounds 3] [--items 1600] [--threads 2] [--budget 1024] [--max-length 256]
 *     [--min-weight-elements N] [--min-cosine 0.99] [--out result.json]
 *
 * `--models` takes folders of ../shared/conformance (or paths). The kit's models there are 32 wide
 * with random weights: at the default `--min-weight-elements` (16,384) nothing of the cross-encoder
 * is quantized (the table says so) and SPLADE only has its vocabulary head rewritten; pass
 * `--min-weight-elements 0` to quantize them as test/conformance/quantized.test.ts does. Their
 * speeds say little about real models; their fidelity columns still show saturation.
 * Prints a markdown table and writes JSON to bench/results/weight-formats-<timestamp>.json (or `--out`).
 */

const { values: args } = parseArgs({
  options: {
    models: { type: 'string', default: 'bench-minilm-l6' },
    rounds: { type: 'string', default: '3' },
    items: { type: 'string', default: '1600' },
    threads: { type: 'string', default: '2' },
    budget: { type: 'string', default: '1024' },
    'max-length': { type: 'string', default: '256' },
    'min-weight-elements': { type: 'string' },
    'min-cosine': { type: 'string', default: String(DEFAULT_MIN_COSINE) },
    out: { type: 'string' },
  },
});

const ROUNDS = Number(args.rounds);
const THREADS = Number(args.threads);
const BUDGET = Number(args.budget);
const MAX_LENGTH = Number(args['max-length']);
const MIN_COSINE = Number(args['min-cosine']);
const MIN_WEIGHT_ELEMENTS = args['min-weight-elements'] === undefined ? undefined : Number(args['min-weight-elements']);
const FORMATS = ['uint8', 'int8'] as const satisfies readonly WeightFormat[];
type Graph = 'fp32' | WeightFormat;
const GRAPHS: readonly Graph[] = ['fp32', ...FORMATS];

/** How a model's output becomes what is compared (see the header). */
type Kind = 'mean' | 'cls' | 'splade' | 'scores' | 'rows';

const HfConfig = z.looseObject({ architectures: z.array(z.string()).optional() });
const PoolingConfig = z.looseObject({ pooling_mode_cls_token: z.boolean().optional() });

function modelDirOf(name: string): string {
  if (name === 'bench-minilm-l6') return BENCH_MODEL;
  return isAbsolute(name) || name.includes('/') ? name : join(SHARED_DIR, 'conformance', name);
}

function readJson<T>(path: string, schema: z.ZodType<T>): T | null {
  return existsSync(path) ? schema.parse(JSON.parse(readFileSync(path, 'utf8'))) : null;
}

/** From the model folder's files, and the rank of its first output where they say nothing. */
function kindOf(modelDir: string, outputRank: number): Kind {
  const architectures = readJson(join(modelDir, 'config.json'), HfConfig)?.architectures ?? [];
  if (architectures.some((a) => a.endsWith('ForSequenceClassification'))) return 'scores';
  if (existsSync(join(modelDir, '1_SpladePooling'))) return 'splade';
  if (outputRank !== 3) return 'rows';
  return readJson(join(modelDir, '1_Pooling', 'config.json'), PoolingConfig)?.pooling_mode_cls_token === true ? 'cls' : 'mean';
}

const sessionOptions = ceilingSessionOptions(THREADS);

/** Ranks with ties averaged (Spearman's definition). */
function ranks(values: readonly number[]): Float64Array {
  const order = values.map((_, i) => i).sort((a, b) => (values[a] ?? 0) - (values[b] ?? 0));
  const out = new Float64Array(values.length);
  for (let start = 0; start < order.length; ) {
    let end = start;
    while (end + 1 < order.length && values[order[end + 1] ?? 0] === values[order[start] ?? 0]) end++;
    for (let k = start; k <= end; k++) out[order[k] ?? 0] = (start + end) / 2;
    start = end + 1;
  }
  return out;
}

function spearman(a: readonly number[], b: readonly number[]): number {
  const ra = ranks(a);
  const rb = ranks(b);
  const mean = (a.length - 1) / 2;
  // Pearson of the centred ranks is the cosine of them.
  return cosine(ra.map((r) => r - mean), rb.map((r) => r - mean));
}

/** One item's compared vector from a batch output (row `row`, its mask over `seqLen` positions). */
function pooled(kind: Exclude<Kind, 'scores'>, tensor: ort.Tensor, row: number, mask: BigInt64Array, seqLen: number): Float64Array {
  const data = tensor.data as Float32Array;
  const dims = tensor.dims;
  const perRow = data.length / (dims[0] ?? 1);
  const base = row * perRow;
  const real = (t: number): boolean => mask[row * seqLen + t] === 1n;
  if (kind === 'rows') {
    // Rank 2 and up: every value of the row, at real token positions where the second axis is tokens.
    const perToken = dims.length >= 3 && dims[1] === seqLen ? perRow / seqLen : perRow;
    const out: number[] = [];
    for (let i = 0; i < perRow; i++) if (perToken === perRow || real(Math.floor(i / perToken))) out.push(data[base + i] ?? 0);
    return Float64Array.from(out);
  }
  const width = dims[2] ?? 0;
  const out = new Float64Array(width);
  if (kind === 'cls') {
    for (let h = 0; h < width; h++) out[h] = data[base + h] ?? 0;
    return out;
  }
  let count = 0;
  for (let t = 0; t < seqLen; t++) {
    if (!real(t)) continue;
    count++;
    const at = base + t * width;
    for (let h = 0; h < width; h++) {
      const x = data[at + h] ?? 0;
      if (kind === 'mean') out[h] = (out[h] ?? 0) + x;
      else out[h] = Math.max(out[h] ?? 0, Math.log1p(Math.max(0, x)));
    }
  }
  if (kind === 'mean' && count > 0) for (let h = 0; h < width; h++) out[h] = (out[h] ?? 0) / count;
  return out;
}

interface Fidelity {
  /** What was compared (the header explains each). */
  compared: string;
  meanCosine: number;
  minCosine: number;
  /** Cross-encoders only: the largest |score fp32 − score int8| and Spearman's rho over the corpus. */
  maxScoreDiff?: number;
  spearman?: number;
}

/** One untimed pass over the corpus with all three graphs loaded, each int8 output compared with fp32's. */
async function measureFidelity(modelDir: string, encoded: readonly Encoded[], paths: Record<Graph, string>): Promise<{ kind: Kind; byFormat: Record<WeightFormat, Fidelity> }> {
  const sessions = {} as Record<Graph, ort.InferenceSession>;
  for (const graph of GRAPHS) sessions[graph] = await ort.InferenceSession.create(paths[graph], sessionOptions);
  try {
    const reference = sessions.fp32;
    const outputName = reference.outputNames[0] ?? '';
    const meta = reference.outputMetadata[0];
    const kind = kindOf(modelDir, meta?.isTensor === true ? meta.shape.length : 0);
    const cosines: Record<WeightFormat, number[]> = { uint8: [], int8: [] };
    const scores: Record<Graph, number[]> = { fp32: [], uint8: [], int8: [] };
    const batches = packBatches(encoded.map((e) => e.ids.length), { maxBatchTokens: BUDGET, maxBatchItems: 1024 });
    for (const batch of batches) {
      const seqLen = Math.max(...batch.indices.map((i) => encoded[i]?.ids.length ?? 0));
      const n = batch.indices.length;
      const ids = new BigInt64Array(n * seqLen);
      const mask = new BigInt64Array(n * seqLen);
      const types = new BigInt64Array(n * seqLen);
      batch.indices.forEach((index, row) => {
        const item = encoded[index];
        item?.ids.forEach((id, t) => {
          ids[row * seqLen + t] = BigInt(id);
          mask[row * seqLen + t] = 1n;
          types[row * seqLen + t] = BigInt(item.typeIds[t] ?? 0);
        });
      });
      const all: Record<string, ort.Tensor> = {
        input_ids: new ort.Tensor('int64', ids, [n, seqLen]),
        attention_mask: new ort.Tensor('int64', mask, [n, seqLen]),
        token_type_ids: new ort.Tensor('int64', types, [n, seqLen]),
      };
      const feeds = Object.fromEntries(reference.inputNames.flatMap((name) => (all[name] === undefined ? [] : [[name, all[name]]])));
      const outputs = {} as Record<Graph, ort.Tensor>;
      for (const graph of GRAPHS) {
        const output = (await sessions[graph].run(feeds))[outputName];
        if (output === undefined || !(output.data instanceof Float32Array)) throw new Error(`${graph} graph: no float output ${outputName}`);
        outputs[graph] = output;
      }
      for (let row = 0; row < n; row++) {
        if (kind === 'scores') {
          for (const graph of GRAPHS) {
            const perRow = outputs[graph].data.length / n;
            scores[graph].push((outputs[graph].data as Float32Array)[row * perRow] ?? 0);
          }
          continue;
        }
        const left = pooled(kind, outputs.fp32, row, mask, seqLen);
        for (const format of FORMATS) cosines[format].push(cosine(left, pooled(kind, outputs[format], row, mask, seqLen)));
      }
    }
    const byFormat = {} as Record<WeightFormat, Fidelity>;
    for (const format of FORMATS) {
      if (kind === 'scores') {
        const whole = cosine(scores.fp32, scores[format]);
        const maxScoreDiff = scores.fp32.reduce((max, s, i) => Math.max(max, Math.abs(s - (scores[format][i] ?? 0))), 0);
        byFormat[format] = { compared: 'score vector over the corpus (first logit)', meanCosine: whole, minCosine: whole, maxScoreDiff, spearman: spearman(scores.fp32, scores[format]) };
      } else {
        const list = cosines[format];
        const compared = kind === 'rows' ? 'raw output row per item' : `${kind === 'splade' ? 'SPLADE' : kind} pooled embedding per item`;
        byFormat[format] = { compared, meanCosine: list.reduce((a, b) => a + b, 0) / list.length, minCosine: Math.min(...list) };
      }
    }
    return { kind, byFormat };
  } finally {
    for (const session of Object.values(sessions)) await session.release();
  }
}


/** Below this paired difference the two formats are called a tie (round-to-round noise on a shared 2-core machine). */
const TIE = 0.02;

function verdictOf(auto: WeightFormat, rewritten: number, tokensPerSecond: Record<Graph, number>, int8OverUint8: number, fidelity: Record<WeightFormat, Fidelity>): { answer: 'yes' | 'no' | 'n/a'; line: string } {
  if (rewritten === 0) return { answer: 'n/a', line: 'n/a: the quantizer rewrote nothing at these settings, both int8 graphs are the fp32 one (try --min-weight-elements 0)' };
  const passes = (f: WeightFormat): boolean => fidelity[f].minCosine >= MIN_COSINE;
  const other: WeightFormat = auto === 'int8' ? 'uint8' : 'int8';
  const autoOverOther = auto === 'int8' ? int8OverUint8 : 1 / int8OverUint8;
  const speed = `${auto} weights ${autoOverOther.toFixed(3)}× ${other} weights (median of paired rounds; ${(tokensPerSecond[auto] / tokensPerSecond.fp32).toFixed(2)}× fp32)`;
  const cos = (f: WeightFormat): string => `min cosine ${f} ${fidelity[f].minCosine.toFixed(5)}`;
  if (!passes(auto)) {
    return passes(other)
      ? { answer: 'no', line: `no: auto picks ${auto}, below the ${MIN_COSINE} floor (${cos(auto)}), while ${other} passes (${cos(other)}); ${speed}` }
      : { answer: 'no', line: `no: neither format reaches the ${MIN_COSINE} floor (${cos(auto)}, ${cos(other)}): Shoal's gate would refuse int8 if its calibration agreed` };
  }
  if (!passes(other) || autoOverOther >= 1) return { answer: 'yes', line: `yes: auto picks ${auto}: ${speed}; ${cos(auto)}${passes(other) ? '' : `, ${other} below the floor (${cos(other)})`}` };
  if (autoOverOther >= 1 - TIE) return { answer: 'yes', line: `yes (a tie within ${TIE * 100} %): auto picks ${auto}: ${speed}; ${cos(auto)}, ${cos(other)}` };
  return { answer: 'no', line: `no: auto picks ${auto} but ${other} is faster and passes the floor: ${speed}; ${cos(auto)}, ${cos(other)}` };
}

async function benchModel(name: string, texts: readonly string[], cacheDir: string, auto: WeightFormat): Promise<Record<string, unknown> & { rows: Row[]; verdict: string }> {
  const modelDir = modelDirOf(name);
  const fp32Path = join(modelDir, 'onnx', 'model.onnx');
  const built: Record<WeightFormat, QuantizedGraph> = {} as Record<WeightFormat, QuantizedGraph>;
  for (const format of FORMATS) {
    const started = performance.now();
    built[format] = await quantizeToCache({ source: fp32Path, cacheDir, options: { weights: format, ...(MIN_WEIGHT_ELEMENTS === undefined ? {} : { minWeightElements: MIN_WEIGHT_ELEMENTS }) } });
    process.stderr.write(`${name}: ${format}-weights graph built in ${Math.round(performance.now() - started)} ms\n`);
  }
  const paths: Record<Graph, string> = { fp32: fp32Path, uint8: built.uint8.path, int8: built.int8.path };
  const rewritten = built.uint8.record.report.matmul + built.uint8.record.report.gemm;

  const config = readJson(join(modelDir, 'config.json'), HfConfig);
  const pairs = config?.architectures?.some((a) => a.endsWith('ForSequenceClassification')) === true;
  const qs = queries();
  const tokenizer = await TextTokenizer.load(modelDir);
  const encoded = texts.map((text, i) => (pairs ? tokenizer.encode(qs[i % qs.length] ?? '', { maxLength: MAX_LENGTH, pair: text }) : tokenizer.encode(text, { maxLength: MAX_LENGTH })));
  const ids = encoded.map((e) => e.ids);

  const perRound: Record<Graph, number[]> = { fp32: [], uint8: [], int8: [] };
  let realTokens = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const order = GRAPHS.map((_, k) => GRAPHS[(k + round) % GRAPHS.length] ?? 'fp32');
    for (const graph of order) {
      const [result] = await measureCeiling(modelDir, ids, [BUDGET], THREADS, paths[graph]);
      if (result === undefined) throw new Error('no ceiling result');
      perRound[graph].push(result.tokensPerSecond);
      realTokens = result.realTokens;
    }
    process.stderr.write(`${name}: round ${round + 1}/${ROUNDS}: ${GRAPHS.map((g) => `${g} ${Math.round(perRound[g].at(-1) ?? 0)}`).join(', ')} tok/s\n`);
  }
  const { kind, byFormat } = await measureFidelity(modelDir, encoded, paths);

  const tokensPerSecond = Object.fromEntries(GRAPHS.map((g) => [g, median(perRound[g])])) as Record<Graph, number>;
  const ratio = (a: Graph, b: Graph): number => median(perRound[a].map((t, r) => t / (perRound[b][r] ?? t)));
  const int8OverUint8 = ratio('int8', 'uint8');
  const verdict = verdictOf(auto, rewritten, tokensPerSecond, int8OverUint8, byFormat);
  const rows: Row[] = GRAPHS.map((graph) => {
    const fidelity = graph === 'fp32' ? undefined : byFormat[graph];
    const extra = fidelity?.spearman === undefined ? '' : `max |Δ| ${fidelity.maxScoreDiff?.toFixed(4) ?? '?'}, ρ ${fidelity.spearman.toFixed(5)}`;
    return {
      model: name,
      graph: graph === 'fp32' ? 'fp32' : `int8, ${graph} weights${graph === auto ? ' (auto)' : ''}`,
      'median tok/s': Math.round(tokensPerSecond[graph]),
      // 0: nothing was rewritten, the "int8" graph is the fp32 one and its figures are noise.
      'int8 matmuls': graph === 'fp32' ? '' : String(built[graph].record.report.matmul + built[graph].record.report.gemm),
      '× fp32': graph === 'fp32' ? '1' : ratio(graph, 'fp32').toFixed(3),
      'mean cos': fidelity === undefined ? '' : fidelity.meanCosine.toFixed(6),
      'min cos': fidelity === undefined ? '' : fidelity.minCosine.toFixed(6),
      'scores (cross-encoder)': extra,
    };
  });
  return {
    model: name,
    modelDir,
    kind,
    tokens: realTokens,
    graphs: Object.fromEntries(
      GRAPHS.map((graph) => [
        graph,
        {
          // The int8 graphs lived in this run's temporary cache (removed at the end): their key says which.
          ...(graph === 'fp32' ? { path: paths.fp32 } : {}),
          medianTokensPerSecond: Math.round(tokensPerSecond[graph]),
          tokensPerSecondPerRound: perRound[graph].map((t) => Math.round(t)),
          ratioToFp32: Number(ratio(graph, 'fp32').toFixed(4)),
          ...(graph === 'fp32' ? {} : { quantizer: { key: built[graph].key, report: built[graph].record.report, bytes: built[graph].outputBytes }, fidelity: byFormat[graph] }),
        },
      ]),
    ),
    int8OverUint8: Number(int8OverUint8.toFixed(4)),
    verdict: verdict.answer,
    verdictLine: verdict.line,
    rows,
  };
}

async function main(): Promise<void> {
  const texts = mixedCorpus(Number(args.items));
  const models = (args.models ?? '').split(',').map((m) => m.trim()).filter((m) => m !== '');
  const cpu = thisCpuReport();
  const auto = cpu.weightFormat;
  const load = loadavg()[0] ?? 0;
  const workDir = mkdtempSync(join(tmpdir(), 'shoal-weight-formats-'));
  const cacheDir = join(workDir, 'quantized');
  mkdirSync(cacheDir, { recursive: true });
  try {
    const results = [];
    for (const name of models) results.push(await benchModel(name, texts, cacheDir, auto));
    const loadAverage = { start: Number(load.toFixed(2)), end: Number((loadavg()[0] ?? 0).toFixed(2)) };
    const data = {
      bench: 'weight-formats',
      items: texts.length,
      rounds: ROUNDS,
      threads: THREADS,
      budget: BUDGET,
      maxLength: MAX_LENGTH,
      minWeightElements: MIN_WEIGHT_ELEMENTS ?? 'default',
      fidelityFloor: MIN_COSINE,
      loadAverage,
      cpu,
      autoWeights: auto,
      models: results.map(({ rows: _rows, ...rest }) => rest),
    };
    console.log(`\n${cpu.int8Kernel}; fp32 ${cpu.fp32Kernel}; Shoal's weights: auto picks ${auto} (${cpu.reason})`);
    console.log(`${texts.length} mixed items, ${ROUNDS} interleaved rounds, ${THREADS} threads, budget ${BUDGET}, load avg ${loadAverage.start} → ${loadAverage.end}\n`);
    console.log(markdownTable(results.flatMap((r) => r.rows)));
    for (const r of results) console.log(`\nverdict ${String(r.model)}: ${r.verdictLine}`);
    console.log(`\n${writeResult('weight-formats', data, args.out)}`);
  } finally {
    rmSync(workDir, { recursive: true, force: true });
  }
}

await main();
