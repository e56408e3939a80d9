import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';

/**
 * The benchmark corpora of the throughput issue, from ../shared/data:
 * - uniform: SciFact abstracts (`title + " " + text`) in file order;
 * - mixed: a multi-tenant stream repeating one abstract, one query, one Flipkart product title, one query.
 */

export const SHARED_DIR = process.env.SHOAL_SHARED_DIR ?? join(import.meta.dirname, '..', '..', '..', 'shared');
export const DATA_DIR = join(SHARED_DIR, 'data');
export const BENCH_MODEL = join(SHARED_DIR, 'conformance', 'bench-minilm-l6');

const Doc = z.looseObject({ title: z.string(), text: z.string() });
const Query = z.looseObject({ text: z.string() });
const Product = z.looseObject({ title: z.string() });

function jsonl<T>(path: string, schema: z.ZodType<T>): T[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => schema.parse(JSON.parse(line)));
}

export function abstracts(): string[] {
  return jsonl(join(DATA_DIR, 'scifact', 'corpus.jsonl'), Doc).map((d) => `${d.title} ${d.text}`);
}

export function queries(): string[] {
  return jsonl(join(DATA_DIR, 'scifact', 'queries.jsonl'), Query).map((q) => q.text);
}

export function productTitles(): string[] {
  return jsonl(join(DATA_DIR, 'products', 'flipkart-1050.jsonl'), Product).map((p) => p.title);
}

export function uniformCorpus(size: number): string[] {
  return abstracts().slice(0, size);
}

export function mixedCorpus(size: number): string[] {
  const docs = abstracts();
  const qs = queries();
  const products = productTitles();
  const out: string[] = [];
  let d = 0;
  let q = 0;
  let p = 0;
  while (out.length < size) {
    const step = out.length % 4;
    if (step === 0) out.push(docs[d++ % docs.length] ?? '');
    else if (step === 2) out.push(products[p++ % products.length] ?? '');
    else out.push(qs[q++ % qs.length] ?? '');
  }
  return out;
}
