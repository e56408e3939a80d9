import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { encodeDense } from '../pipelines/documents/stages/encode.js';
import { parseCatalog } from '../pipelines/inference/catalog.js';
import { InferenceEngine } from '../pipelines/inference/engine.js';
import { engineOptionsFromEnv } from '../services/settings/engine-settings.js';
import { BENCH_MODEL, DATA_DIR } from './lib/corpora.js';
import { machine, percentile, printTable, writeResult, type Row } from './lib/report.js';

/**
 * The search latency floor that query encoding sets (issue 41, item 2): every `POST /v1/search`
 * encodes its query with the index's model before the store is asked, so at C concurrent
 * clients in a closed loop the median latency cannot fall below about C / (queries encoded per
 * second), whatever the index does. This measures that part alone: SciFact claims encoded one
 * per call (role query, priority interactive, as the search route does) by the engine, from 1, 8
 * and 32 concurrent callers, fp32 and int8 (`--precisions`), in interleaved rounds; per setting
 * the p50/p99 latency and the throughput, and the floor it implies for the 25 ms p50 target.
 *
 *   npx tsx bench/query-encode.ts [--rounds 3] [--queries 200] [--precisions fp32,int8] [--out FILE]
 */

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    queries: { type: 'string', default: '200' },
    precisions: { type: 'string', default: 'fp32,int8' },
    out: { type: 'string' },
  },
});
const ROUNDS = z.coerce.number().int().positive().parse(args.rounds);
const QUERIES = z.coerce.number().int().positive().parse(args.queries);
const PRECISIONS = args.precisions.split(',').map((p) => z.enum(['fp32', 'int8']).parse(p));
const CALLERS = [1, 8, 32] as const;
const TARGET_P50_MS = 25;

const Claim = z.looseObject({ text: z.string() });
const claims = readFileSync(join(DATA_DIR, 'scifact', 'queries.jsonl'), 'utf8')
  .split('\n')
  .filter((line) => line.trim() !== '')
  .map((line) => Claim.parse(JSON.parse(line)).text);

const median = (values: readonly number[]): number => percentile(values, 50);

async function main(): Promise<void> {
  const catalog = parseCatalog({ models: Object.fromEntries(PRECISIONS.map((precision) => [`bench.${precision}`, { source: BENCH_MODEL, precision }])) }, 'query-encode bench');
  const engine = new InferenceEngine({ ...engineOptionsFromEnv(process.env), catalog });
  const perRound: Record<string, { p50: number; p99: number; perSecond: number }[]> = {};
  try {
    for (const precision of PRECISIONS) await encodeDense(engine, claims.slice(0, 8), { model: `bench.${precision}`, role: 'query', priority: 'interactive' });
    for (let round = 0; round < ROUNDS; round++) {
      for (const precision of PRECISIONS) {
        for (const callers of CALLERS) {
          const offset = (round * QUERIES) % claims.length;
          const latencies: number[] = [];
          let next = 0;
          const started = performance.now();
          await Promise.all(Array.from({ length: callers }, async () => {
            for (let at = next++; at < QUERIES; at = next++) {
              const begun = performance.now();
              await encodeDense(engine, [claims[(offset + at) % claims.length] ?? ''], { model: `bench.${precision}`, role: 'query', priority: 'interactive' });
              latencies.push(performance.now() - begun);
            }
          }));
          const seconds = (performance.now() - started) / 1000;
          (perRound[`${precision}, ${callers} caller${callers === 1 ? '' : 's'}`] ??= []).push({ p50: percentile(latencies, 50), p99: percentile(latencies, 99), perSecond: QUERIES / seconds });
        }
      }
      console.error(`round ${round + 1} of ${ROUNDS} done`);
    }
  } finally {
    await engine.close();
  }
  const rows: Row[] = Object.entries(perRound).map(([setting, rounds]) => {
    const perSecond = median(rounds.map((r) => r.perSecond));
    const callers = Number(/(\d+) caller/.exec(setting)?.[1] ?? 1);
    return {
      setting,
      'p50 ms': Math.round(median(rounds.map((r) => r.p50)) * 10) / 10,
      'p99 ms': Math.round(median(rounds.map((r) => r.p99)) * 10) / 10,
      'queries/s': Math.round(perSecond),
      // Closed loop: C callers each waiting for its answer see at least C / throughput.
      'p50 floor at these callers, ms': Math.round((callers / perSecond) * 1000 * 10) / 10,
      [`encode alone within ${TARGET_P50_MS} ms p50`]: median(rounds.map((r) => r.p50)) <= TARGET_P50_MS ? 'yes' : 'no',
    };
  });
  printTable('query encoding alone (bench-minilm-l6, SciFact claims, one per call, medians over rounds)', rows);
  const data = {
    machine: machine(),
    command: `npx tsx bench/query-encode.ts ${process.argv.slice(2).join(' ')}`.trim(),
    model: BENCH_MODEL,
    rounds: ROUNDS,
    queriesPerSetting: QUERIES,
    rows,
    perRound,
  };
  if (args.out === undefined) console.log(`wrote ${writeResult('query-encode', data)}`);
  else {
    writeFileSync(args.out, `${JSON.stringify(data, null, 2)}\n`);
    console.log(`wrote ${args.out}`);
  }
}

await main();
