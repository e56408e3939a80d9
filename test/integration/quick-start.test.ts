import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { REPO_ROOT } from '../helpers/shared.js';
import { readmeCommand } from '../helpers/readme.js';
import { parseJsonl, runShoal } from '../helpers/shoal-cli.js';

/**
 * The README's offline quick start, run as a newcomer would: the two commands are read from the
 * README itself (so the test fails when the README and the CLI drift apart) and run from the
 * repository root on the committed sample folder, with only the index moved to a temp folder.
 */

const Hit = z.object({ rank: z.number(), score: z.number(), id: z.string(), document_id: z.string(), source: z.string(), page: z.number().nullable(), text: z.string() });

let index: string;
beforeAll(() => {
  index = mkdtempSync(join(tmpdir(), 'shoal-quick-start-'));
});
afterAll(() => rmSync(index, { recursive: true, force: true }));

describe('README quick start (offline)', () => {
  it('ingests examples/docs, OCR of the scanned page included, and searches it', async () => {
    const env = { SHOAL_MODEL_DIR: 'test/fixtures/models' };
    const ingestArgs = readmeCommand('SHOAL_MODEL_DIR=test/fixtures/models npx shoal ingest examples/docs').map((arg) => (arg === '/tmp/idx' ? index : arg));
    const ingest = await runShoal([...ingestArgs, '--json'], { cwd: REPO_ROOT, env });
    expect(ingest.code, ingest.stderr).toBe(0);
    const summary = z.looseObject({ documents: z.looseObject({ ok: z.number(), failed: z.number() }) }).safeParse(JSON.parse(ingest.stdout.trim().split('\n').at(-1) ?? '{}'));
    expect(summary.success, ingest.stdout).toBe(true);
    if (summary.success) expect(summary.data.documents).toMatchObject({ ok: 4, failed: 0 });

    const searchArgs = readmeCommand('SHOAL_MODEL_DIR=test/fixtures/models npx shoal search').map((arg) => (arg === '/tmp/idx' ? index : arg));
    const search = await runShoal(searchArgs, { cwd: REPO_ROOT, env });
    expect(search.code, search.stderr).toBe(0);
    const hits = parseJsonl(search.stdout, Hit);
    expect(hits.map((hit) => hit.rank)).toEqual([1, 2, 3]);
    expect(hits.every((hit) => hit.source.includes('examples/docs'))).toBe(true);

    // The scanned notice has no text layer: its words reach the index through OCR, on page 1.
    const scanned = await runShoal(['search', 'dredger Grete northern channel', '--index', index, '--k', '50', '--filter', "source LIKE '%notice-14%'"], { cwd: REPO_ROOT, env });
    expect(scanned.code, scanned.stderr).toBe(0);
    const rows = parseJsonl(scanned.stdout, Hit);
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.map((row) => row.text).join(' ')).toMatch(/dredger/i);
    expect(rows.every((row) => row.page === 1)).toBe(true);
  }, 240_000);
});
