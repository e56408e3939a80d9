import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { FIXTURE_MODELS_DIR, TINY_MEAN } from '../helpers/nats-worker.js';
import { runShoal } from '../helpers/shoal-cli.js';

/**
 * Issue 37 item 2, metadata everywhere, end to end on the CLI: three real PDFs get their
 * automatic metadata (title from the info dictionary, mtime, size, mime), JSON Lines records
 * carry their own (`metadata` and fields lifted by `--metadata-fields`), every hit of
 * `shoal search --json` returns its document's metadata, and `--filter` selects on it.
 */

const env = { SHOAL_MODEL_DIR: FIXTURE_MODELS_DIR };
const PDFS = '/work/shared/data/pdfs';
const TITLED = join(PDFS, '011-google-doc-document__google-doc-document.pdf');
const FILES = [join(PDFS, '001-trivial__minimal-document.pdf'), join(PDFS, '002-trivial-libre-office-writer__002-trivial-libre-office-writer.pdf'), TITLED];

const Hit = z.looseObject({ source: z.string(), metadata: z.record(z.string(), z.unknown()).nullable() });

const RECORDS = [
  { id: 'rec-2019', text: 'The harbour budget for 2019 covered new pontoons.', year: 2019, metadata: { tag: ['finance'] } },
  { id: 'rec-2021', text: 'In 2021 the harbour budget doubled for dredging.', year: 2021, title: 'Dredging', metadata: { tag: ['finance', 'ops'], public: true } },
  { id: 'rec-2023', text: 'The 2023 harbour report lists the ferry timetable.', year: 2023, metadata: { tag: 'ops', url: 'https://example.org/r/2023' } },
].map((record) => JSON.stringify(record)).join('\n');

describe('shoal ingest / search: document metadata', () => {
  const dir = mkdtempSync(join(tmpdir(), 'shoal-metadata-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const index = join(dir, 'index');
  const search = async (filter?: string): Promise<z.infer<typeof Hit>[]> => {
    const run = await runShoal(['search', 'harbour budget', '--index', index, '-k', '1000', ...(filter === undefined ? [] : ['--filter', filter])], { env, cwd: dir });
    expect(run.code, run.stderr).toBe(0);
    return run.stdout.trim().split('\n').filter((line) => line !== '').map((line) => Hit.parse(JSON.parse(line)));
  };
  const sources = (hits: readonly z.infer<typeof Hit>[]): string[] => [...new Set(hits.map((hit) => hit.source))].sort();

  it('stores automatic file metadata and record metadata, returns it with each hit and filters on it', async () => {
    const run = await runShoal(['ingest', ...FILES, '-', '--metadata-fields', 'year,title', '--index', index, '--model', TINY_MEAN, '--json'], { env, stdin: RECORDS, cwd: dir });
    expect(run.code, run.stderr).toBe(0);

    const hits = await search();
    expect(sources(hits)).toEqual([...FILES, 'rec-2019', 'rec-2021', 'rec-2023'].sort());
    const bySource = new Map(hits.map((hit) => [hit.source, hit.metadata]));
    for (const file of FILES) {
      const metadata = bySource.get(file);
      expect(metadata, file).toMatchObject({ size: statSync(file).size, mime: 'application/pdf', mtime: statSync(file).mtime.toISOString() });
    }
    expect(bySource.get(TITLED)?.title).toBe('PDF Example Document');
    // A record's own fields, lifted or given; inline text gets no automatic fields.
    expect(bySource.get('rec-2021')).toEqual({ tag: ['finance', 'ops'], public: true, year: 2021, title: 'Dredging' });
    expect(bySource.get('rec-2023')).toEqual({ tag: 'ops', url: 'https://example.org/r/2023', year: 2023 });

    expect(sources(await search('metadata.year >= 2020'))).toEqual(['rec-2021', 'rec-2023']);
    expect(sources(await search("metadata.year >= 2020 AND metadata.tag IN ('finance')"))).toEqual(['rec-2021']);
    expect(sources(await search("metadata.tag = 'ops'"))).toEqual(['rec-2021', 'rec-2023']);
    expect(sources(await search("metadata.mime = 'application/pdf' AND metadata.size < 15000"))).toEqual(FILES.filter((file) => statSync(file).size < 15_000).sort());
    expect(sources(await search("metadata.title = 'PDF Example Document'"))).toEqual([TITLED]);
    expect(sources(await search('metadata.public = true OR metadata.year IS NULL'))).toEqual([...FILES, 'rec-2021'].sort());
  }, 120_000);

  it('refuses a bad metadata field naming the line and field, and still refuses fields not lifted', async () => {
    const badKey = await runShoal(['ingest', '-', '--index', join(dir, 'bad'), '--model', TINY_MEAN], { env, stdin: `${JSON.stringify({ id: 'a', text: 'x' })}\n${JSON.stringify({ id: 'b', text: 'y', metadata: { 'bad-key': 1 } })}`, cwd: dir });
    expect(badKey.code).toBe(2);
    expect(badKey.stderr).toContain('stdin line 2: metadata field "bad-key" is not a name');
    const nested = await runShoal(['ingest', '-', '--index', join(dir, 'bad'), '--model', TINY_MEAN], { env, stdin: JSON.stringify({ id: 'a', text: 'x', metadata: { author: { name: 'A' } } }), cwd: dir });
    expect(nested.stderr).toContain('stdin line 1: metadata field "author" is an object (metadata is flat)');
    const typo = await runShoal(['ingest', '-', '--metadata-fields', 'year', '--index', join(dir, 'bad'), '--model', TINY_MEAN], { env, stdin: JSON.stringify({ id: 'a', text: 'x', year: 2020, yaer: 2021 }), cwd: dir });
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('other fields are not allowed ("yaer")');
    const both = await runShoal(['ingest', '-', '--metadata-fields', 'year', '--index', join(dir, 'bad'), '--model', TINY_MEAN], { env, stdin: JSON.stringify({ id: 'a', text: 'x', year: 2020, metadata: { year: 2021 } }), cwd: dir });
    expect(both.stderr).toContain('"year" is both a field lifted by --metadata-fields and a key of "metadata"');
    const noStdin = await runShoal(['ingest', FILES[0] ?? '', '--metadata-fields', 'year', '--index', join(dir, 'bad'), '--model', TINY_MEAN], { env, cwd: dir });
    expect(noStdin.code).toBe(2);
    expect(noStdin.stderr).toContain('--metadata-fields lifts fields of the JSON Lines records read from stdin');
    const badField = await runShoal(['ingest', '-', '--metadata-fields', 'year,text', '--index', join(dir, 'bad'), '--model', TINY_MEAN], { env, stdin: '{}', cwd: dir });
    expect(badField.code).toBe(2);
    expect(badField.stderr).toContain('id, text, path and metadata are the record itself');
    const big = await runShoal(['ingest', '-', '--index', join(dir, 'bad'), '--model', TINY_MEAN], { env, stdin: JSON.stringify({ id: 'a', text: 'x', metadata: { note: 'n'.repeat(20_000) } }), cwd: dir });
    expect(big.stderr).toMatch(/stdin line 1: metadata is \d+ bytes as JSON, over the limit of 16384/);
    const badFilter = await runShoal(['search', 'x', '--index', index, '--filter', "metadata.title LIKE 'PDF%'"], { env, cwd: dir });
    expect(badFilter.code).toBe(2);
    expect(badFilter.stderr).toContain('LIKE is for the stored text columns');
  }, 120_000);
});
