import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Classification } from '../../adapters/protocol/classify.js';
import { FIXTURE_MODELS_DIR, TINY_MEAN } from '../helpers/nats-worker.js';
import { DATA_DIR, sharedAvailable } from '../helpers/shared.js';
import { SHOAL_BIN, parseJsonl, runShoal } from '../helpers/shoal-cli.js';
import { CLI_FROM_SOURCE } from '../helpers/cli-build.js';

/**
 * Issue 37: a 200-product `shoal classify --out FILE` stopped early kept nothing (the default
 * --chunk-lines 256 made the catalog one classify call written at its end) and `--resume` silently
 * started over. A real child process (default chunk size) is stopped once its first lines are in
 * FILE.partial, with SIGTERM and with SIGKILL: the lines it finished stay, the run had not finished,
 * and `--resume` continues after them to the same products as an uninterrupted run, none twice.
 * A cross-encoder rescoring 60 candidates per product makes the run last a few seconds.
 */

const PRODUCTS = join(DATA_DIR, 'products', 'flipkart-1050.jsonl');
const GOOGLE = join(DATA_DIR, 'taxonomy', 'google-taxonomy-with-ids.en-US.txt');
const available = [PRODUCTS, GOOGLE].every(sharedAvailable);
const COUNT = 200;

describe.skipIf(!available)('shoal classify stopped early keeps what it finished', () => {
  const dir = mkdtempSync(join(tmpdir(), 'shoal-classify-stop-'));
  const env = { SHOAL_MODEL_DIR: FIXTURE_MODELS_DIR, SHOAL_CACHE_DIR: join(dir, 'cache') };
  const catalog = join(dir, 'products.jsonl');
  let ids: string[];
  let reference: Map<string, string>;

  const args = (out: string): string[] => ['classify', catalog, '--taxonomy', GOOGLE, '--model', TINY_MEAN, '--id-field', 'uniq_id', '--rerank-model', 'tiny-cross-encoder', '--rerank-top', '60', '--candidates', '60', '--out', out];
  const lines = (path: string): string[] => (existsSync(path) ? readFileSync(path, 'utf8').split('\n').filter((line) => line !== '') : []);

  beforeAll(async () => {
    const rows = readFileSync(PRODUCTS, 'utf8').split('\n').filter((line) => line.trim() !== '').slice(0, COUNT);
    writeFileSync(catalog, `${rows.join('\n')}\n`);
    ids = rows.map((row) => z.object({ uniq_id: z.string() }).parse(JSON.parse(row)).uniq_id);
    const whole = join(dir, 'whole.jsonl');
    const run = await runShoal(args(whole), { env });
    expect(run.code, run.stderr).toBe(0);
    reference = new Map(parseJsonl(readFileSync(whole, 'utf8'), Classification).map((line) => [String(line.id), line.category.id]));
  }, 60_000);

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    it(`${signal} once the first lines are written: they stay in FILE.partial, and --resume finishes the rest`, async () => {
      const out = join(dir, `${signal}.jsonl`);
      const partial = `${out}.partial`;
      const child = spawn(process.execPath, [SHOAL_BIN, ...args(out)], { env: { ...process.env, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, SHOAL_THREADS: '1', ...env }, stdio: 'ignore' });
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, by) => resolve({ code, signal: by })));
      let finished = false;
      void exited.then(() => (finished = true));
      // Polled: the file is the only sign of progress a child gives.
      while (!finished && lines(partial).length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
      child.kill(signal);
      const end = await exited;
      if (signal === 'SIGTERM') expect(end.code).toBe(143);
      else expect(end.signal).toBe('SIGKILL');
      expect(existsSync(out)).toBe(false);
      const kept = lines(partial);
      expect(kept.length).toBeGreaterThan(0);
      expect(kept.length).toBeLessThan(COUNT);
      expect(parseJsonl(`${kept.join('\n')}\n`, Classification).map((line) => String(line.id))).toEqual(ids.slice(0, kept.length));

      const resumed = await runShoal([...args(out), '--resume'], { env });
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(resumed.stderr).toContain(`${kept.length} already done (--resume)`);
      const final = lines(out);
      expect(final.slice(0, kept.length)).toEqual(kept);
      const classified = parseJsonl(`${final.join('\n')}\n`, Classification);
      expect(classified.map((line) => String(line.id))).toEqual(ids);
      expect(classified.map((line) => line.category.id)).toEqual(ids.map((id) => reference.get(id)));
    }, 60_000);
  }

  it('--resume with no FILE.partial says it starts from the first product', async () => {
    const out = join(dir, 'fresh.jsonl');
    const run = await runShoal(['classify', catalog, '--taxonomy', GOOGLE, '--model', TINY_MEAN, '--id-field', 'uniq_id', '--out', out, '--resume'], { env });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain(`warning: --resume: ${out}.partial holds no finished product (there is none): starting from the first one`);
    expect(lines(out)).toHaveLength(COUNT);
  }, 60_000);
});
