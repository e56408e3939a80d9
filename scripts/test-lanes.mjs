#!/usr/bin/env node
// `npm test`: the suite in three vitest processes side by side, one per project of
// vitest.config.ts, each running its files one at a time. One vitest process runs its projects
// one after the other when each is limited to one file at a time, and a single lane left the
// 2-core machine idle most of the time (many files wait on child processes, servers and outage
// timers). Each line is prefixed with its lane; the exit status is the first failing lane's.
// A failing lane's report (vitest's failures and summary, at the end of its output) is printed
// again once every lane has finished: the lanes' lines interleave, and a CI log read from its
// tail would otherwise show only the lanes that ended last.
// With arguments (`npm test -- test/unit/x.test.ts`) it is plain `vitest run ARGS`.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const VITEST = ['vitest', 'run'];
const LANES = ['units-and-nats', 'integration', 'outages-and-documents'];
/** Lines kept for the repeat: the start of vitest's failure report, and the lane's last lines (its summary). */
const REPORT_LINES = 150;
const TAIL_LINES = 20;
// vitest colours its report; the rule that opens it is matched without the colours.
const ANSI = /\x1b\[[0-9;]*m/g;
const args = process.argv.slice(2);

/**
 * Runs a command, prefixing its lines. Resolves to its exit code and its report: the first lines
 * from where vitest's failure report starts (a "⎯⎯ Failed Tests N ⎯⎯", "⎯⎯ Failed Suites N ⎯⎯" or
 * "⎯⎯ Unhandled Errors ⎯⎯" rule), then its last lines.
 */
function run(command, prefix) {
  const child = spawn('npx', ['--no-install', ...command], { stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
  let failures = null;
  let seen = 0;
  const tail = [];
  for (const [stream, out] of [[child.stdout, process.stdout], [child.stderr, process.stderr]]) {
    createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
      out.write(`${prefix}${line}\n`);
      if (failures === null && /⎯+ (Failed Tests|Failed Suites|Unhandled Errors?)\b/.test(line.replace(ANSI, ''))) {
        failures = [];
        tail.length = 0;
      }
      if (failures !== null && ++seen <= REPORT_LINES) {
        failures.push(line);
        return;
      }
      tail.push(line);
      if (tail.length > TAIL_LINES) tail.shift();
    });
  }
  const report = () => (failures === null ? tail : seen <= REPORT_LINES ? failures : [...failures, `… (${seen - REPORT_LINES - tail.length} lines left out)`, ...tail]);
  return new Promise((resolve) => child.on('close', (code, signal) => resolve({ code: code ?? (signal === null ? 1 : 128), report: report() })));
}

const started = Date.now();
const results = args.length > 0
  ? [await run([...VITEST, ...args], '')]
  : await Promise.all(LANES.map((lane) => run([...VITEST, '--project', lane], `[${lane}] `)));
const codes = results.map((result) => result.code);
if (args.length === 0) {
  const failed = LANES.filter((_, i) => codes[i] !== 0);
  for (const lane of failed) {
    const { report } = results[LANES.indexOf(lane)];
    console.log(`\n===== ${lane} failed; its report again =====`);
    for (const line of report) console.log(`[${lane}] ${line}`);
  }
  console.log(`\nnpm test: ${LANES.length} lanes in ${((Date.now() - started) / 1000).toFixed(0)} s; ${failed.length === 0 ? 'all passed' : `failed: ${failed.join(', ')}`}`);
}
process.exit(codes.find((code) => code !== 0) ?? 0);
