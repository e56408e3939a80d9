import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { FIXTURES_DIR } from '../helpers/shared.js';
import { runShoal } from '../helpers/shoal-cli.js';

/**
 * What `shoal ingest` says about the `--index URI` it wrote to, through the real CLI: the table
 * the summary names is the one the rows went to (a table named in the URI wins over `--table`),
 * and no part of a password in the URI is printed, even one the user did not percent-encode.
 */

const MODEL = join(FIXTURES_DIR, 'models', 'tiny-bert-mean');
const root = await mkdtemp(join(tmpdir(), 'shoal-index-uri-'));
const docs = join(root, 'docs');

const Summary = z.object({ documents: z.object({ total: z.number(), ok: z.number() }), index: z.string(), table: z.string() });

beforeAll(async () => {
  await mkdir(docs);
  await writeFile(join(docs, 'a.txt'), 'The harbor master counts forty fishing boats every morning before sunrise.');
}, 60_000);
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('shoal ingest --index URI: the summary', () => {
  it('names the table the URI chose, where the rows are, not the --table default', async () => {
    const dir = join(root, 'lance');
    const uri = `lancedb://${dir}?table=notes`;
    const json = await runShoal(['ingest', '--no-progress', '--json', '--model', MODEL, '--index', uri, docs]);
    expect(json.code, json.stderr).toBe(0);
    const summary = Summary.parse(JSON.parse(json.stdout));
    expect(summary.documents).toMatchObject({ total: 1, ok: 1 });
    const db = await lancedb.connect(dir);
    expect((await db.tableNames()).filter((name) => !name.endsWith('__documents'))).toEqual(['notes']);
    db.close();
    expect(summary.table).toBe('notes');
    // The human summary too, with --table given and overruled by the URI.
    const human = await runShoal(['ingest', '--no-progress', '--model', MODEL, '--index', uri, '--table', 'other', docs]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toContain('(table notes)');
    expect(human.stdout).not.toContain('(table other)');
  }, 120_000);

  it('prints no part of a password that holds "/" or "@" unencoded, in the error of a URI it cannot read', async () => {
    const run = await runShoal(['ingest', '--no-progress', '--model', MODEL, '--index', 'postgres://shoal:Zx9/Qw@db.example:5432/shoal', docs]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('INVALID_INPUT');
    expect(`${run.stdout}${run.stderr}`).not.toMatch(/Zx9|Qw@/);
  }, 60_000);
});
