import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Classification } from '../../adapters/protocol/classify.js';
import { FIXTURE_MODELS_DIR, TINY_MEAN } from '../helpers/nats-worker.js';
import { parseJsonl, runShoal } from '../helpers/shoal-cli.js';

/**
 * `shoal classify` given what people get wrong: an empty --fields, another file as the catalog,
 * a bad line deep in the catalog, a CSV record with a field too many, a spreadsheet export or
 * JSON Lines as the taxonomy, a --resume file edited by hand. Each is answered with what and where, and no
 * product classified before a bad line is lost.
 */

const dir = mkdtempSync(join(tmpdir(), 'shoal-classify-mistakes-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const env = { SHOAL_MODEL_DIR: FIXTURE_MODELS_DIR, SHOAL_CACHE_DIR: join(dir, 'cache') };
const taxonomy = join(dir, 'taxonomy.txt');
writeFileSync(taxonomy, 'Apparel\nApparel > Shoes\nElectronics\nElectronics > Phones\nHome > Kitchen\n');
const product = (i: number): string => JSON.stringify({ id: `p${i}`, title: i % 2 === 0 ? `running shoes ${i}` : `android phone ${i}` });
const run = (args: readonly string[]): ReturnType<typeof runShoal> => runShoal(['classify', ...args, '--taxonomy', taxonomy, '--model', TINY_MEAN, '--fields', 'title'], { env });

describe('shoal classify on mistakes', () => {
  it('--fields with no name is a usage error (exit 2)', async () => {
    const catalog = join(dir, 'few.jsonl');
    writeFileSync(catalog, `${product(1)}\n`);
    const result = await runShoal(['classify', catalog, '--taxonomy', taxonomy, '--model', TINY_MEAN, '--fields', ''], { env });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--fields names no field');
  });

  it('a catalog whose first line is not JSON (the taxonomy given by mistake) fails before any category is embedded', async () => {
    const result = await run([taxonomy]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('line 1: not valid JSON');
    expect(result.stderr).not.toContain('categories:');
  });

  it('a bad line deep in the catalog stops the run after every product before it is written', async () => {
    const catalog = join(dir, 'bad-at-300.jsonl');
    const lines = Array.from({ length: 299 }, (_, i) => product(i + 1));
    writeFileSync(catalog, `${[...lines, '{"id": "broken', product(300)].join('\n')}\n`);
    const out = join(dir, 'bad-at-300.out.jsonl');
    const result = await run([catalog, '--out', out]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('line 300: not valid JSON');
    const written = parseJsonl(readFileSync(`${out}.partial`, 'utf8'), Classification);
    expect(written.map((line) => line.id)).toEqual(lines.map((_, i) => `p${i + 1}`));
  });

  it('a CSV record with a field too many is named by its own number, after the records before it are written', async () => {
    const catalog = join(dir, 'rows.csv');
    writeFileSync(catalog, 'id,title\nc1,running shoes\nc2,android phone\nc3,kitchen knife\nc4,a,b\nc5,lamp\n');
    const out = join(dir, 'rows.out.jsonl');
    const result = await run([catalog, '--out', out]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('record 4: has 3 fields, the header has 2');
    expect(parseJsonl(readFileSync(`${out}.partial`, 'utf8'), Classification).map((line) => line.id)).toEqual(['c1', 'c2', 'c3']);
  });

  it('a CSV export or JSON Lines as the taxonomy, or a file mixing formats, is refused with the line', async () => {
    const catalog = join(dir, 'one.jsonl');
    writeFileSync(catalog, `${product(2)}\n`);
    const csv = join(dir, 'taxonomy.csv');
    writeFileSync(csv, 'id,path\n1,Apparel > Shoes\n');
    const fromCsv = await runShoal(['classify', catalog, '--taxonomy', csv, '--model', TINY_MEAN, '--fields', 'title'], { env });
    expect(fromCsv.code).toBe(2);
    expect(fromCsv.stderr).toContain('line 1: "id,path" looks like a CSV header');
    const jsonl = join(dir, 'taxonomy.jsonl');
    writeFileSync(jsonl, '{"id":1,"text":"x"}\n{"id":2,"text":"y"}\n');
    const fromJsonl = await runShoal(['classify', catalog, '--taxonomy', jsonl, '--model', TINY_MEAN, '--fields', 'title'], { env });
    expect(fromJsonl.code, fromJsonl.stderr).toBe(2);
    expect(fromJsonl.stderr).toContain('error [INVALID_INPUT]: taxonomy file');
    expect(fromJsonl.stderr).toContain('line 1: "{"id":1,"text":"x"}" is a JSON object (a JSON Lines file, such as the catalog?); a taxonomy is a text file with one category per line');
    expect(fromJsonl.stdout).toBe('');
    const mixed = join(dir, 'mixed.txt');
    writeFileSync(mixed, 'Apparel > Shoes\n2 - Home\n');
    const fromMixed = await runShoal(['classify', catalog, '--taxonomy', mixed, '--model', TINY_MEAN, '--fields', 'title'], { env });
    expect(fromMixed.code).toBe(2);
    expect(fromMixed.stderr).toContain('line 2');
    expect(fromMixed.stderr).toContain('mixes formats');
  });

  it('--resume refuses an output whose last complete line is not JSON (edited by hand), instead of skipping products', async () => {
    const catalog = join(dir, 'resume.jsonl');
    writeFileSync(catalog, `${Array.from({ length: 5 }, (_, i) => product(i + 1)).join('\n')}\n`);
    const out = join(dir, 'resume.out.jsonl');
    writeFileSync(`${out}.partial`, 'not json at all\n');
    const result = await run([catalog, '--out', out, '--resume']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('is not JSON');
    expect(readFileSync(`${out}.partial`, 'utf8')).toBe('not json at all\n');
  });

  it('a flag that means nothing without its partner is refused (exit 2), not ignored', async () => {
    const catalog = join(dir, 'flags.jsonl');
    writeFileSync(catalog, `${product(1)}\n`);
    const cases: Array<[string[], string]> = [
      [['--image-weight', '0.5'], '--image-weight needs --image-model'],
      [['--rerank-top', '5'], '--rerank-top needs --rerank-model'],
      [['--prefix', 'other'], '--prefix is the subject prefix of --nats'],
      [['--part-items', '16'], '--part-items sizes the job parts of --nats'],
    ];
    const runs = await Promise.all(cases.map(([extra]) => run([catalog, ...extra])));
    runs.forEach((result, i) => {
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toContain(cases[i]?.[1]);
    });
  });

  it('--gold values that name no category of the taxonomy are counted in a warning', async () => {
    const catalog = join(dir, 'gold.jsonl');
    const lines = [
      JSON.stringify({ id: 'g1', title: 'running shoes', label: 'Apparel > Shoes' }),
      JSON.stringify({ id: 'g2', title: 'android phone', label: 'Mobiles & Accessories >> Mobiles >> Some Phone' }),
    ];
    writeFileSync(catalog, `${lines.join('\n')}\n`);
    const result = await run([catalog, '--gold', 'label', '--out', join(dir, 'gold.out.jsonl')]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain('--gold label: 1 of 2 values name no category of the taxonomy (e.g. "Mobiles & Accessories >> Mobiles >> Some Phone")');
  });
});
