import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ensureBuiltCli, runShoal } from './lib/cli-run.js';
import { BENCH_MODEL, mixedCorpus } from './lib/corpora.js';
import { percentile, printTable, writeResult, type Row } from './lib/report.js';

/**
 * Start-up of the built `shoal` command, optionally side by side with another checkout (`--against
 * DIR`, its own `npm run build` done): `shoal --version`, a one-line `shoal encode` of
 * bench-minilm-l6 in fp32 and int8 (node, modules, threads, model detection, session, one batch,
 * exit), and with `--corpus N` the whole encode of the mixed corpus of N texts. Runs are
 * interleaved (round r: every variant and precision in turn) and medians are reported, because
 * single timings on a shared machine are noisy. Each version has its own cache folder, filled
 * before the rounds by one untimed run per precision (the int8 graph, mapped copies): the caches
 * each version writes differ (since stop 27 large int8 graphs are written with mapped weights,
 * which would also speed up an older version reading them).
 *
 *   npx tsx bench/startup.ts [--rounds 5] [--against ../other-checkout] [--corpus 1600] [--build]
 */

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    against: { type: 'string' },
    corpus: { type: 'string', default: '0' },
    build: { type: 'boolean', default: false },
  },
});

ensureBuiltCli(args.build);
const rounds = Number(args.rounds);
const corpusSize = Number(args.corpus);
const workDir = mkdtempSync(join(tmpdir(), 'shoal-startup-'));
const catalog = join(workDir, 'catalog.json');
writeFileSync(catalog, JSON.stringify({ models: { 'bench.fp32': { source: BENCH_MODEL, precision: 'fp32' }, 'bench.int8': { source: BENCH_MODEL, precision: 'int8' } } }));
const oneLine = join(workDir, 'one.jsonl');
writeFileSync(oneLine, `${JSON.stringify({ id: 1, text: 'how long does a cold start take?' })}\n`);
const corpus = join(workDir, 'corpus.jsonl');
if (corpusSize > 0) writeFileSync(corpus, mixedCorpus(corpusSize).map((text, i) => JSON.stringify({ id: i, text })).join('\n'));

const variants: { name: string; bin: string | undefined; env: NodeJS.ProcessEnv }[] = [{ name: 'this checkout', bin: undefined, env: { SHOAL_CACHE_DIR: join(workDir, 'cache') } }];
if (args.against !== undefined) {
  const bin = resolve(args.against, 'bin', 'shoal.js');
  if (!existsSync(bin)) throw new Error(`${bin} does not exist`);
  variants.unshift({ name: args.against, bin, env: { SHOAL_CACHE_DIR: join(workDir, 'cache-against') } });
}

const encode = (precision: string, input: string): string[] => ['encode', '--model', `bench.${precision}`, '--catalog', catalog, '--input', input, '--threads', '2', '--max-length', '256', '--quiet'];
const cases: { name: string; args: string[] }[] = [
  { name: '--version', args: ['--version'] },
  { name: 'one line fp32', args: encode('fp32', oneLine) },
  { name: 'one line int8', args: encode('int8', oneLine) },
  ...(corpusSize > 0 ? [{ name: `${corpusSize} texts fp32`, args: encode('fp32', corpus) }, { name: `${corpusSize} texts int8`, args: encode('int8', corpus) }] : []),
];

try {
  // Fills each version's cache (int8 graph, mapped copies), untimed.
  for (const variant of variants) {
    for (const precision of ['fp32', 'int8']) await runShoal(encode(precision, oneLine), { env: variant.env, ...(variant.bin === undefined ? {} : { bin: variant.bin }) });
  }
  const seconds = new Map<string, number[]>();
  for (let round = 0; round < rounds; round++) {
    for (const variant of variants) {
      for (const test of cases) {
        const key = `${variant.name}\t${test.name}`;
        const timing = await runShoal(test.args, { env: variant.env, ...(variant.bin === undefined ? {} : { bin: variant.bin }) });
        seconds.set(key, [...(seconds.get(key) ?? []), timing.seconds]);
      }
    }
  }
  const rows: Row[] = [...seconds].map(([key, values]) => {
    const [variant, test] = key.split('\t');
    return { variant: variant ?? '', run: test ?? '', 'median s': percentile(values, 50), runs: values.map((v) => v.toFixed(2)).join(' ') };
  });
  printTable(`shoal start-up, ${rounds} interleaved rounds`, rows);
  console.log(`results: ${writeResult('startup', { rounds, corpus: corpusSize, variants: variants.map((v) => v.name), rows })}`);
} finally {
  rmSync(workDir, { recursive: true, force: true });
}
