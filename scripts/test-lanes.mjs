#!/usr/bin/env node
// `npm test`: the suite in three vitest processes side by side, one per project of
// vitest.config.ts, each running its files one at a time. One vitest process runs its projects
// one after the other when each is limited to one file at a time, and a single lane left the
// 2-core machine idle most of the time (many files wait on child processes, servers and outage
// timers). Each line is prefixed with its lane; the exit status is the first failing lane's.
// With arguments (`npm test -- test/unit/x.test.ts`) it is plain `vitest run ARGS`.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const VITEST = ['vitest', 'run'];
const LANES = ['units-and-nats', 'integration', 'outages-and-documents'];
const args = process.argv.slice(2);

function run(command, prefix) {
  const child = spawn('npx', ['--no-install', ...command], { stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
  for (const [stream, out] of [[child.stdout, process.stdout], [child.stderr, process.stderr]]) {
    createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => out.write(`${prefix}${line}\n`));
  }
  return new Promise((resolve) => child.on('close', (code, signal) => resolve(code ?? (signal === null ? 1 : 128))));
}

const started = Date.now();
const codes = args.length > 0
  ? [await run([...VITEST, ...args], '')]
  : await Promise.all(LANES.map((lane) => run([...VITEST, '--project', lane], `[${lane}] `)));
if (args.length === 0) {
  const failed = LANES.filter((_, i) => codes[i] !== 0);
  console.log(`\nnpm test: ${LANES.length} lanes in ${((Date.now() - started) / 1000).toFixed(0)} s; ${failed.length === 0 ? 'all passed' : `failed: ${failed.join(', ')}`}`);
}
process.exit(codes.find((code) => code !== 0) ?? 0);
