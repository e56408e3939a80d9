import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { parseCatalog } from '../pipelines/inference/catalog.js';
import { InferenceEngine } from '../pipelines/inference/engine.js';
import type { SparseVector } from '../adapters/protocol/results.js';
import { BENCH_MODEL, mixedCorpus } from './lib/corpora.js';
import { markdownTable, median, writeResult, type Row } from './lib/report.js';
import { writeSpladeHeadGraph } from './lib/splade-head.js';

/**
 * SPLADE through Shoal's engine, pooled inside the graph (the default, splade.ts `poolInGraph`)
 * against the logits pooled in JavaScript (`poolInGraph: false`, how it ran before), fp32 and
 * int8. The model is a SPLADE graph at a real size: bench-minilm-l6's encoder with BERT's
 * 30,522-term masked-LM head (bench/lib/splade-head.ts, random head weights) in a folder with
 * its tokenizer and a SpladePooling module, so the family is detected as for a real export.
 * Texts/s over the mixed corpus in interleaved rounds, medians; the sparse vectors of the two
 * poolings are compared term by term. The random head makes about half of the 30,522 terms of
 * every text non-zero (a trained model keeps a few hundred), so building and moving the sparse
 * vectors costs both variants more than in real use: the ratios understate the gain.
 *
 *   npx tsx bench/splade-pooling.ts [--rounds 3] [--items 800] [--out result.json]
 */

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    items: { type: 'string', default: '800' },
    out: { type: 'string' },
  },
});

const TOKENIZER_FILES = ['config.json', 'sentence_bert_config.json', 'special_tokens_map.json', 'tokenizer.json', 'tokenizer_config.json', 'vocab.txt'];

/** The SPLADE folder: tokenizer files and max length (256, as the raw bench truncates), modules.json with SpladePooling (max, relu), onnx/model.onnx. */
async function spladeFolder(root: string): Promise<string> {
  const dir = join(root, 'splade-minilm');
  mkdirSync(join(dir, 'onnx'), { recursive: true });
  mkdirSync(join(dir, '1_SpladePooling'), { recursive: true });
  for (const file of TOKENIZER_FILES) copyFileSync(join(BENCH_MODEL, file), join(dir, file));
  writeFileSync(
    join(dir, 'modules.json'),
    JSON.stringify([
      { idx: 0, name: '0', path: '', type: 'sentence_transformers.sparse_encoder.models.MLMTransformer' },
      { idx: 1, name: '1', path: '1_SpladePooling', type: 'sentence_transformers.sparse_encoder.models.SpladePooling' },
    ]),
  );
  writeFileSync(join(dir, '1_SpladePooling', 'config.json'), JSON.stringify({ pooling_strategy: 'max', activation_function: 'relu', word_embedding_dimension: 30_522 }));
  await writeSpladeHeadGraph(join(BENCH_MODEL, 'onnx', 'model.onnx'), join(dir, 'onnx', 'model.onnx'));
  return dir;
}

/** Largest |Δ| of two sparse vectors over the union of their terms. */
function largestDifference(a: SparseVector | undefined, b: SparseVector | undefined): number {
  const weights = new Map<number, number>();
  a?.indices.forEach((index, k) => weights.set(index, a.values[k] ?? 0));
  let worst = 0;
  const seen = new Set<number>();
  b?.indices.forEach((index, k) => {
    seen.add(index);
    worst = Math.max(worst, Math.abs((weights.get(index) ?? 0) - (b.values[k] ?? 0)));
  });
  for (const [index, value] of weights) if (!seen.has(index)) worst = Math.max(worst, Math.abs(value));
  return worst;
}

async function main(): Promise<void> {
  const texts = mixedCorpus(Number(args.items));
  const rounds = Number(args.rounds);
  const root = mkdtempSync(join(tmpdir(), 'shoal-splade-bench-'));
  const load = loadavg()[0] ?? 0;
  try {
    const dir = await spladeFolder(root);
    const variants = [
      { name: 'fp32, pooled in JavaScript', precision: 'fp32', poolInGraph: false },
      { name: 'fp32, pooled in the graph', precision: 'fp32', poolInGraph: true },
      { name: 'int8, pooled in JavaScript', precision: 'int8', poolInGraph: false },
      { name: 'int8, pooled in the graph', precision: 'int8', poolInGraph: true },
    ] as const;
    const models = Object.fromEntries(variants.map((v, k) => [`v${k}`, { source: dir, precision: v.precision, options: { poolInGraph: v.poolInGraph } }]));
    const engine = new InferenceEngine({ catalog: parseCatalog({ models }, 'bench'), runtime: { cacheDir: join(root, 'cache') } });
    const perRound = variants.map((): number[] => []);
    const outputs: (SparseVector | undefined)[][] = variants.map(() => []);
    try {
      for (const [k] of variants.entries()) await engine.encode({ model: `v${k}`, items: texts.slice(0, 16) });
      for (let round = 0; round < rounds; round++) {
        const order = variants.map((_, k) => (k + round) % variants.length);
        for (const k of order) {
          const started = performance.now();
          const result = await engine.encode({ model: `v${k}`, items: texts, priority: 'bulk' });
          perRound[k]?.push(texts.length / ((performance.now() - started) / 1000));
          outputs[k] = result.items.map((item) => item.sparse);
        }
        process.stderr.write(`round ${round + 1}/${rounds}: ${variants.map((v, k) => `${v.name} ${(perRound[k]?.at(-1) ?? 0).toFixed(1)}`).join(', ')} texts/s\n`);
      }
    } finally {
      await engine.close();
    }
    const ratio = (a: number, b: number): number => median((perRound[a] ?? []).map((t, r) => t / (perRound[b]?.[r] ?? t)));
    const worst = (a: number, b: number): number => Math.max(...texts.map((_, i) => largestDifference(outputs[a]?.[i], outputs[b]?.[i])));
    const rows: Row[] = variants.map((v, k) => ({
      variant: v.name,
      'texts/s (median)': (median(perRound[k] ?? []) || 0).toFixed(1),
      '× fp32 pooled in JavaScript': ratio(k, 0).toFixed(3),
      rounds: (perRound[k] ?? []).map((t) => t.toFixed(1)).join(' '),
    }));
    const difference = { fp32: worst(0, 1), int8: worst(2, 3) };
    // Random head weights leave about half the vocabulary positive; a trained SPLADE model keeps a
    // few hundred terms, so here the sparse vectors themselves (built, copied between threads)
    // cost far more than in real use, in both variants alike.
    const terms = median((outputs[1] ?? []).map((vector) => vector?.indices.length ?? 0));
    console.log(`\nSPLADE head on bench-minilm-l6, ${texts.length} mixed texts, ${rounds} interleaved rounds, load ${load.toFixed(2)} → ${(loadavg()[0] ?? 0).toFixed(2)}\n`);
    console.log(markdownTable(rows));
    console.log(`\nlargest |Δ| of a term weight, graph vs JavaScript pooling: fp32 ${difference.fp32}, int8 ${difference.int8}; median terms per text ${terms}`);
    console.log(`\n${writeResult('splade-pooling', { items: texts.length, rounds, variants: rows, perRound, largestDifference: difference, medianTermsPerText: terms, loadAverage: { start: load, end: loadavg()[0] ?? 0 } }, args.out)}`);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
