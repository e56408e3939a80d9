import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Classification } from '../../adapters/protocol/classify.js';
import { loadTaxonomyFile } from '../../adapters/taxonomy/index.js';
import { FIXTURE_MODELS_DIR, TINY_MEAN } from '../helpers/nats-worker.js';
import { DATA_DIR, sharedAvailable } from '../helpers/shared.js';
import { SHOAL_BIN, parseJsonl, runShoal } from '../helpers/shoal-cli.js';
import { CLI_FROM_SOURCE } from '../helpers/cli-build.js';

/**
 * `shoal classify` input and output mechanics on the Flipkart products, the Google taxonomy and
 * the tiny random-weight encoder: a killed run resumes after its last complete line without
 * repeating a product, CSV and JSON Lines give the same lines, --max-depth trims the taxonomy.
 */

const PRODUCTS = join(DATA_DIR, 'products', 'flipkart-1050.jsonl');
const GOOGLE = join(DATA_DIR, 'taxonomy', 'google-taxonomy-with-ids.en-US.txt');
const available = [PRODUCTS, GOOGLE].every(sharedAvailable);

const Product = z.looseObject({ uniq_id: z.string(), title: z.string(), description: z.string(), category_tree_raw: z.string(), level1: z.string(), level2: z.string(), level3: z.string().nullable().transform((value) => value ?? '') });
type Product = z.infer<typeof Product>;

describe.skipIf(!available)('shoal classify: resume, CSV, max depth', () => {
  const dir = mkdtempSync(join(tmpdir(), 'shoal-classify-resume-'));
  const cache = join(dir, 'cache');
  const env = { SHOAL_MODEL_DIR: FIXTURE_MODELS_DIR, SHOAL_CACHE_DIR: cache };
  let products: Product[];
  const catalog = join(dir, 'products.jsonl');

  const base = (input: string, taxonomy: string, out: string): string[] => ['classify', input, '--taxonomy', taxonomy, '--model', TINY_MEAN, '--id-field', 'uniq_id', '--top-k', '3', '--out', out];

  beforeAll(() => {
    const text = readFileSync(PRODUCTS, 'utf8');
    products = text.split('\n').filter((line) => line.trim() !== '').map((line) => Product.parse(JSON.parse(line)));
    writeFileSync(catalog, products.slice(0, 500).map((product) => JSON.stringify(product)).join('\n'));
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('resumes a killed run after its last complete line: no product twice, the same lines as an uninterrupted run', async () => {
    const whole = join(dir, 'whole.jsonl');
    const gold = ['--gold', 'category_tree_raw', '--json'];
    const uninterrupted = await runShoal([...base(catalog, GOOGLE, whole), ...gold], { env });
    expect(uninterrupted.code).toBe(0);
    const fullRun = readFileSync(whole, 'utf8');
    const out = join(dir, 'resumed.jsonl');
    const child = spawn(process.execPath, [SHOAL_BIN, ...base(catalog, GOOGLE, out), '--chunk-lines', '16'], {
      env: { ...process.env, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, SHOAL_THREADS: '1', ...env },
      stdio: 'ignore',
    });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const partial = `${out}.partial`;
    // Kill it once it has written some products, long before it is done.
    for (let waited = 0; waited < 60_000; waited += 50) {
      if (existsSync(partial) && readFileSync(partial, 'utf8').split('\n').length > 100) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    child.kill('SIGKILL');
    await exited;
    const before = readFileSync(partial, 'utf8').split('\n').filter((line) => line !== '').length;
    expect(before).toBeGreaterThan(99);
    expect(before).toBeLessThan(500);
    expect(existsSync(out)).toBe(false);

    const resumed = await runShoal([...base(catalog, GOOGLE, out), '--resume', '--chunk-lines', '16', ...gold], { env });
    expect(resumed.code).toBe(0);
    expect(resumed.stderr).toMatch(/already done \(--resume\)/);
    const after = readFileSync(out, 'utf8');
    const ids = parseJsonl(after, Classification).map((line) => line.id);
    expect(ids).toEqual(products.slice(0, 500).map((product) => product.uniq_id));
    expect(after).toBe(fullRun);
    // --gold after --resume scores the earlier lines too (read back from the partial output): the same report.
    expect(JSON.parse(resumed.stdout)).toEqual(JSON.parse(uninterrupted.stdout));
    expect(JSON.parse(resumed.stdout)).toMatchObject({ products: 500 });
  }, 120_000);

  it('reads CSV (quoted fields with commas, quotes and newlines) into the same lines as JSON Lines; --max-depth 2 trims the taxonomy', async () => {
    const some = products.slice(0, 30);
    const description = (p: Product, i: number): string => (i % 2 === 0 ? p.description : `${p.description}\r\nsecond "line", with commas`);
    const quote = (value: string): string => `"${value.replaceAll('"', '""')}"`;
    const csv = ['uniq_id,title,description', ...some.map((p, i) => [p.uniq_id, quote(p.title), quote(description(p, i))].join(','))].join('\r\n');
    const jsonlFile = join(dir, 'some.jsonl');
    writeFileSync(jsonlFile, some.map((p, i) => JSON.stringify({ uniq_id: p.uniq_id, title: p.title, description: description(p, i) })).join('\n'));
    writeFileSync(join(dir, 'some.csv'), csv);
    const depth = ['--max-depth', '2', '--hierarchy'];
    const [fromCsv, fromJsonl] = [await runShoal([...base(join(dir, 'some.csv'), GOOGLE, join(dir, 'csv.out')), ...depth], { env }), await runShoal([...base(jsonlFile, GOOGLE, join(dir, 'jsonl.out')), ...depth], { env })];
    expect(fromCsv.code).toBe(0);
    expect(fromJsonl.code).toBe(0);
    const google = await loadTaxonomyFile(GOOGLE, { maxDepth: 2 });
    expect(fromCsv.stderr).toMatch(new RegExp(`categories: ${google.categories.length} (embedded|loaded)`));
    const lines = parseJsonl(readFileSync(join(dir, 'csv.out'), 'utf8'), Classification);
    expect(lines.map((line) => line.id)).toEqual(some.map((p) => p.uniq_id));
    for (const line of lines) {
      expect(google.byId.has(line.category.id)).toBe(true);
      expect(line.category.path.split(' > ').length).toBeLessThanOrEqual(2);
    }
    expect(readFileSync(join(dir, 'csv.out'), 'utf8')).toBe(readFileSync(join(dir, 'jsonl.out'), 'utf8'));
  }, 120_000);
});
