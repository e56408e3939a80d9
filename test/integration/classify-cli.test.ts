import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Classification } from '../../adapters/protocol/classify.js';
import { loadTaxonomyFile, type Taxonomy } from '../../adapters/taxonomy/index.js';
import { FIXTURE_MODELS_DIR, TINY_MEAN } from '../helpers/nats-worker.js';
import { DATA_DIR, sharedAvailable } from '../helpers/shared.js';
import { parseJsonl, runShoal } from '../helpers/shoal-cli.js';

/**
 * `shoal classify` in process on the Flipkart products with the Shopify taxonomy and the tiny
 * random-weight encoder (the categories are meaningless, the mechanics are not): every product
 * gets an existing category, the category cache is built once and reused by the next run, and
 * --gold scores the Flipkart labels against their own category tree exactly as recomputed here.
 * (Resume, CSV and --max-depth: classify-resume.test.ts.)
 */

const PRODUCTS = join(DATA_DIR, 'products', 'flipkart-1050.jsonl');
const SHOPIFY = join(DATA_DIR, 'taxonomy', 'shopify-categories.txt');
const available = [PRODUCTS, SHOPIFY].every(sharedAvailable);

const Product = z.looseObject({ uniq_id: z.string(), title: z.string(), description: z.string(), category_tree_raw: z.string(), level1: z.string(), level2: z.string(), level3: z.string().nullable().transform((value) => value ?? '') });
type Product = z.infer<typeof Product>;

describe.skipIf(!available)('shoal classify (in process)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'shoal-classify-'));
  const cache = join(dir, 'cache');
  const env = { SHOAL_MODEL_DIR: FIXTURE_MODELS_DIR, SHOAL_CACHE_DIR: cache };
  let products: Product[];
  let shopify: Taxonomy;
  let fullRun: string;

  const base = (catalog: string, taxonomy: string, out: string): string[] => ['classify', catalog, '--taxonomy', taxonomy, '--model', TINY_MEAN, '--id-field', 'uniq_id', '--top-k', '3', '--out', out];

  beforeAll(async () => {
    const text = readFileSync(PRODUCTS, 'utf8');
    products = text.split('\n').filter((line) => line.trim() !== '').map((line) => Product.parse(JSON.parse(line)));
    shopify = await loadTaxonomyFile(SHOPIFY);
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('classifies all 1,050 products into existing Shopify categories; a second run reuses the category cache', async () => {
    const out = join(dir, 'full.jsonl');
    const first = await runShoal(base(PRODUCTS, SHOPIFY, out), { env });
    expect(first.stderr).toMatch(/categories: 10595 embedded in/);
    // Said before the long wait starts (a bar follows on a terminal).
    expect(first.stderr).toContain('embedding 10595 categories (not cached yet');
    expect(first.code).toBe(0);
    const lines = parseJsonl(readFileSync(out, 'utf8'), Classification);
    expect(lines.map((line) => line.id)).toEqual(products.map((product) => product.uniq_id));
    for (const line of lines) {
      const index = shopify.byId.get(line.category.id);
      expect(index).toBeDefined();
      expect(shopify.categories[index ?? -1]?.pathText).toBe(line.category.path);
      expect(line.alternatives).toHaveLength(2);
      expect(line.alternatives.every((alternative) => shopify.byPath.get(alternative.path) === shopify.byId.get(alternative.id))).toBe(true);
      expect(line.decided_by).toBe('retrieve');
      expect(line.needs_review).toBe(line.score < 0.5);
    }
    fullRun = readFileSync(out, 'utf8');

    const cacheFiles = readdirSync(join(cache, 'classify'));
    expect(cacheFiles.filter((name) => name.endsWith('.f32'))).toHaveLength(1);
    const matrix = join(cache, 'classify', cacheFiles.find((name) => name.endsWith('.f32')) ?? '');
    const written = statSync(matrix).mtimeMs;
    const subset = join(dir, 'subset.jsonl');
    writeFileSync(subset, products.slice(0, 40).map((product) => JSON.stringify(product)).join('\n'));
    const second = await runShoal(base(subset, SHOPIFY, join(dir, 'again.jsonl')), { env });
    expect(second.code).toBe(0);
    expect(second.stderr).toMatch(/categories: 10595 loaded from the cache/);
    expect(second.stderr).not.toContain('embedding 10595 categories');
    expect(statSync(matrix).mtimeMs).toBe(written);
    // Same vectors from the cache: the same lines as the first run for the same products.
    expect(readFileSync(join(dir, 'again.jsonl'), 'utf8')).toBe(fullRun.split('\n').slice(0, 40).join('\n') + '\n');
  }, 120_000);

  it('--gold scores the Flipkart labels against their own category tree, as recomputed here', async () => {
    const paths = [...new Set(products.map((p) => [p.level1, p.level2, p.level3].filter((name) => name !== '').join(' > ')))];
    const tree = join(dir, 'flipkart-tree.txt');
    writeFileSync(tree, `${paths.join('\n')}\n`);
    const out = join(dir, 'gold.jsonl');
    const run = await runShoal([...base(PRODUCTS, tree, out), '--gold', 'category_tree_raw', '--json'], { env });
    expect(run.code).toBe(0);
    const report = z
      .strictObject({
        products: z.number(),
        accuracy_by_level: z.record(z.string(), z.number()),
        exact: z.number(),
        hierarchical: z.strictObject({ precision: z.number(), recall: z.number(), f1: z.number() }),
        by_branch: z.record(z.string(), z.looseObject({ products: z.number(), exact: z.number() })),
      })
      .parse(JSON.parse(run.stdout));

    // The same figures, computed independently from the written lines and the level fields.
    const lines = parseJsonl(readFileSync(out, 'utf8'), Classification);
    let overlap = 0;
    let predictedSize = 0;
    let goldSize = 0;
    let exact = 0;
    const hits = [0, 0, 0];
    const totals = [0, 0, 0];
    lines.forEach((line, i) => {
      const p = products[i] as Product;
      const gold = [p.level1, p.level2, p.level3].filter((name) => name !== '');
      const predicted = line.category.path.split(' > ');
      const goldSet = new Set(gold.map((_, d) => gold.slice(0, d + 1).join('>')));
      const predictedSet = new Set(predicted.map((_, d) => predicted.slice(0, d + 1).join('>')));
      overlap += [...predictedSet].filter((prefix) => goldSet.has(prefix)).length;
      predictedSize += predictedSet.size;
      goldSize += goldSet.size;
      if (predicted.join('>') === gold.join('>')) exact++;
      gold.forEach((_, d) => {
        totals[d] = (totals[d] ?? 0) + 1;
        if (predicted.slice(0, d + 1).join('>') === gold.slice(0, d + 1).join('>')) hits[d] = (hits[d] ?? 0) + 1;
      });
    });
    const precision = overlap / predictedSize;
    const recall = overlap / goldSize;
    expect(report.products).toBe(1050);
    expect(report.exact).toBeCloseTo(exact / 1050, 6);
    expect(report.accuracy_by_level['1']).toBeCloseTo((hits[0] ?? 0) / (totals[0] ?? 1), 6);
    expect(report.accuracy_by_level['2']).toBeCloseTo((hits[1] ?? 0) / (totals[1] ?? 1), 6);
    expect(report.accuracy_by_level['3']).toBeCloseTo((hits[2] ?? 0) / (totals[2] ?? 1), 6);
    expect(totals).toEqual([1050, 1050, 1047]);
    expect(report.hierarchical.precision).toBeCloseTo(precision, 6);
    expect(report.hierarchical.recall).toBeCloseTo(recall, 6);
    expect(report.hierarchical.f1).toBeCloseTo((2 * precision * recall) / (precision + recall), 6);
    expect(Object.keys(report.by_branch)).toHaveLength(7);
    expect(Object.values(report.by_branch).every((branch) => branch.products === 150)).toBe(true);
    // Random weights: chance level, far from perfect (7 balanced top-level branches).
    expect(report.accuracy_by_level['1']).toBeLessThan(0.6);
  }, 120_000);

  const SEEN = 'uniq_id, title, brand, description, category_tree_raw, level1, level2, level3, image_file, product_url, retail_price';

  it('a --fields name no record has is a usage error (exit 2, one line) before anything is embedded or written', async () => {
    const subset = join(dir, 'fields-subset.jsonl');
    // The file's own lines (field order as in the catalog).
    writeFileSync(subset, `${readFileSync(PRODUCTS, 'utf8').split('\n').slice(0, 40).join('\n')}\n`);
    const out = join(dir, 'nosuch.jsonl');
    const run = await runShoal([...base(subset, SHOPIFY, out), '--fields', 'nosuch'], { env });
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(`error [INVALID_INPUT]: --fields nosuch: no record has this field (fields seen: ${SEEN})\n`);
    expect(run.stdout).toBe('');
    expect(readdirSync(dir).filter((name) => name.startsWith('nosuch'))).toEqual([]);

    // One misspelt name among good ones; on the whole catalog only the first records were read.
    const whole = await runShoal([...base(PRODUCTS, SHOPIFY, out), '--fields', 'title,descripton'], { env });
    expect(whole.code).toBe(2);
    expect(whole.stderr).toBe(`error [INVALID_INPUT]: --fields descripton: none of the first 256 records has this field (fields seen: ${SEEN})\n`);
    // A --template placeholder the same.
    const template = await runShoal([...base(subset, SHOPIFY, out), '--template', '{title} by {brnd}'], { env });
    expect(template.code).toBe(2);
    expect(template.stderr).toBe(`error [INVALID_INPUT]: --template {brnd}: no record has this field (fields seen: ${SEEN})\n`);
  }, 120_000);

  it('a product without text gets an error line in its place (not a category), the others are classified as before, exit 3', async () => {
    const catalog = products.slice(0, 40).map((product, at) => {
      if (at === 3) return { ...product, title: '', description: '   ' };
      if (at === 17) {
        const { title: _title, description: _description, ...rest } = product;
        return rest;
      }
      return product;
    });
    const input = join(dir, 'no-text.jsonl');
    writeFileSync(input, catalog.map((product) => `${JSON.stringify(product)}\n`).join(''));
    const out = join(dir, 'no-text.out.jsonl');
    const run = await runShoal(base(input, SHOPIFY, out), { env });
    expect(run.code).toBe(3);
    expect(run.stderr).toContain(`warning: product "${products[3]?.uniq_id ?? ''}" (record 4) has no text in title, description: written as an error line, not classified\n`);
    expect(run.stderr).toContain(', 2 without text (error lines)');
    expect(run.stderr.trimEnd().split('\n').at(-1)).toBe(
      'error [PARTIAL_FAILURE]: 2 of 40 products have no text in --fields title,description and were not classified (their lines carry "error"); the others are classified',
    );
    // The output is final (not .partial): one line per product, in input order.
    const lines = readFileSync(out, 'utf8').split('\n').filter((line) => line !== '');
    expect(lines).toHaveLength(40);
    expect(JSON.parse(lines[3] ?? '')).toEqual({
      id: products[3]?.uniq_id,
      error: { code: 'INVALID_INPUT', message: 'no text to classify: --fields title,description are missing or empty in record 4' },
    });
    expect(JSON.parse(lines[17] ?? '')).toEqual({
      id: products[17]?.uniq_id,
      error: { code: 'INVALID_INPUT', message: 'no text to classify: --fields title,description are missing or empty in record 18' },
    });
    // Every other line is the full run's line for that product (same text, same vectors).
    const full = fullRun.split('\n');
    lines.forEach((line, at) => {
      if (at !== 3 && at !== 17) expect(line).toBe(full[at]);
    });
  }, 120_000);
});

