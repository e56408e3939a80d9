import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { ScoreResult } from '../adapters/protocol/results.js';
import { parseCatalog } from '../pipelines/inference/catalog.js';
import { InferenceEngine } from '../pipelines/inference/engine.js';
import { SHARED_DIR } from './lib/corpora.js';
import { benchGateway } from './lib/gateway.js';
import { printTable, writeResult, type Row } from './lib/report.js';

/**
 * Causal-LM reranker throughput at the kit size: the qwen3-reranker kit model (Qwen3ForCausalLM
 * layout, KV-cache inputs, 151,936-token vocabulary, graph rewritten to the last token's no/yes
 * logits) scoring the kit's own (query, document) pairs, repeated, in requests of `--per-request`
 * documents: pairs/s in process (engine.score) and over HTTP (POST /v1/score on a listening
 * gateway, one request at a time), with the int8 rewrite off (fp32) and on (int8: every MatMul,
 * the kit's are small so `min_weight_elements: 0`). Runs are interleaved per round.
 *
 *   npx tsx bench/reranker.ts [--rounds 3] [--pairs 256] [--per-request 16] [--threads N]
 */

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    pairs: { type: 'string', default: '256' },
    'per-request': { type: 'string', default: '16' },
    threads: { type: 'string' },
  },
});
const ROUNDS = Number(args.rounds);
const PAIRS = Number(args.pairs);
const PER_REQUEST = Number(args['per-request']);
const MODEL_DIR = join(SHARED_DIR, 'conformance', 'qwen3-reranker');
const VARIANTS = { fp32: 'rerank.fp32', int8: 'rerank.int8' } as const;

const Cases = z.looseObject({ cases: z.array(z.looseObject({ inputs: z.looseObject({ query: z.string(), documents: z.array(z.string()) }) })) });

interface Request {
  query: string;
  items: string[];
}

async function requests(): Promise<Request[]> {
  const { readFile } = await import('node:fs/promises');
  const kit = Cases.parse(JSON.parse(await readFile(join(MODEL_DIR, 'cases.json'), 'utf8')));
  const pairs = kit.cases.flatMap((c) => c.inputs.documents.map((document) => ({ query: c.inputs.query, document })));
  const out: Request[] = [];
  for (let at = 0; at < PAIRS; at += PER_REQUEST) {
    const first = pairs[(at / PER_REQUEST) % pairs.length];
    const items = Array.from({ length: Math.min(PER_REQUEST, PAIRS - at) }, (_, i) => pairs[(at + i) % pairs.length]?.document ?? '');
    out.push({ query: first?.query ?? '', items });
  }
  return out;
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};

async function main(): Promise<void> {
  const cacheDir = mkdtempSync(join(tmpdir(), 'shoal-reranker-bench-'));
  const threads = args.threads === undefined ? {} : { intraOpThreads: Number(args.threads) };
  const catalog = parseCatalog(
    {
      models: {
        [VARIANTS.fp32]: { source: MODEL_DIR, precision: 'fp32' },
        [VARIANTS.int8]: { source: MODEL_DIR, precision: 'int8', quantization: { min_weight_elements: 0 } },
      },
    },
    'reranker bench',
  );
  const engine = new InferenceEngine({ catalog, runtime: { cacheDir, ...threads } });
  const app = benchGateway(engine);
  const work = await requests();
  const timings: Record<string, number[]> = {};
  const record = (key: string, seconds: number): void => {
    (timings[key] ??= []).push(seconds);
  };
  try {
    const address = await app.listen({ port: 0, host: '127.0.0.1' });
    const scores: Record<string, number[]> = {};
    for (const model of Object.values(VARIANTS)) {
      await engine.score({ model, query: 'warm', items: ['up'] });
    }
    for (let round = 0; round < ROUNDS; round++) {
      for (const [precision, model] of Object.entries(VARIANTS)) {
        let started = performance.now();
        const got: number[] = [];
        for (const request of work) {
          const result = await engine.score({ model, query: request.query, items: request.items });
          got.push(...[...result.scores].sort((a, b) => a.index - b.index).map((s) => s.score));
        }
        record(`${precision} in process`, (performance.now() - started) / 1000);
        scores[precision] = got;
        started = performance.now();
        for (const request of work) {
          const response = await fetch(`${address}/v1/score`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ model, query: request.query, items: request.items }),
          });
          if (response.status !== 200) throw new Error(`/v1/score answered ${response.status}: ${(await response.text()).slice(0, 300)}`);
          ScoreResult.parse(await response.json());
        }
        record(`${precision} HTTP /v1/score`, (performance.now() - started) / 1000);
      }
    }
    const inspected = await engine.inspect(VARIANTS.int8);
    const fp32 = scores.fp32 ?? [];
    const maxDiff = (scores.int8 ?? []).reduce((worst, score, i) => Math.max(worst, Math.abs(score - (fp32[i] ?? Number.NaN))), 0);
    const rows: Row[] = Object.entries(timings).map(([form, seconds]) => ({ form, pairs: PAIRS, 'median s': median(seconds), 'pairs/s': Math.round(PAIRS / median(seconds)) }));
    printTable(
      `qwen3-reranker kit model, ${PAIRS} pairs in requests of ${PER_REQUEST}, median of ${ROUNDS} (int8: ${inspected.info.precision?.model?.effective ?? '?'}, ${inspected.info.precision?.model?.rewritten ?? 0} MatMuls; max |P(yes) int8 - fp32| ${maxDiff.toExponential(2)}; load ${loadavg()[0]?.toFixed(1)})`,
      rows,
    );
    writeResult('reranker', { pairs: PAIRS, perRequest: PER_REQUEST, rounds: ROUNDS, rows, timings, int8: inspected.info.precision?.model, maxScoreDiffInt8: maxDiff, load: loadavg() });
  } finally {
    await app.close();
    await engine.close();
    rmSync(cacheDir, { recursive: true, force: true });
  }
}

await main();
