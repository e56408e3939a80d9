import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { availableParallelism, cpus } from 'node:os';
import { thisCpuReport } from '../../adapters/quantize/cpu-features.js';

/** Benchmark output: a JSON file under bench/results/ and a plain table on stdout. */

export interface Row {
  [column: string]: string | number;
}

export function machine(): Record<string, string | number> {
  const report = thisCpuReport();
  return { cpu: cpus()[0]?.model ?? 'unknown', cores: availableParallelism(), node: process.version, int8Kernel: report.int8Kernel, fp32Kernel: report.fp32Kernel, int8Weights: report.weightFormat };
}

function cell(value: string | number | undefined): string {
  return typeof value === 'number' ? (Number.isInteger(value) ? String(value) : value.toFixed(value < 10 ? 3 : 1)) : String(value ?? '');
}

export function printTable(title: string, rows: readonly Row[]): void {
  if (rows.length === 0) return;
  const columns = Object.keys(rows[0] ?? {});
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (values: string[]): string => values.map((v, i) => v.padEnd(widths[i] ?? 0)).join('  ');
  console.log(`\n${title}`);
  console.log(line(columns));
  console.log(line(widths.map((w) => '-'.repeat(w))));
  for (const row of rows) console.log(line(columns.map((c) => cell(row[c]))));
}

/** The same rows as a markdown table (for pasting into docs/benchmarks.md or an issue). */
export function markdownTable(rows: readonly Row[]): string {
  const columns = Object.keys(rows[0] ?? {});
  const line = (values: readonly string[]): string => `| ${values.join(' | ')} |`;
  return [line(columns), line(columns.map(() => '---')), ...rows.map((row) => line(columns.map((c) => cell(row[c]).replace(/\|/g, '\\|'))))].join('\n');
}

/**
 * Writes `data` with the machine's description to `out`, or when none is given to
 * bench/results/<name>-<timestamp>.json; returns the path.
 */
export function writeResult(name: string, data: unknown, out?: string): string {
  let file = out;
  if (file === undefined) {
    const dir = join(import.meta.dirname, '..', 'results');
    mkdirSync(dir, { recursive: true });
    file = join(dir, `${name}-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  }
  writeFileSync(file, `${JSON.stringify({ machine: machine(), ...((data as object) ?? {}) }, null, 2)}\n`);
  return file;
}

/** The middle value (the mean of the two middle ones for an even count); NaN for none. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? Number.NaN) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] ?? Number.NaN;
}
