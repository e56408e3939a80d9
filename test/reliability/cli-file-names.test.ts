import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { printable } from '../../services/cli/printable.js';
import { CONFORMANCE_DIR } from '../helpers/shared.js';
import { runShoal } from '../helpers/shoal-cli.js';

/**
 * Issue 42, item 16: `shoal ingest` printed file names raw, so a file named `\x1b[2J…` cleared the
 * terminal and a name holding a newline forged a line of the summary. Every line the CLI prints
 * about a file (summary, warnings, errors) now escapes what a terminal would act on.
 */

const MODEL = join(CONFORMANCE_DIR, 'bench-minilm-l6');
const root = await mkdtemp(join(tmpdir(), 'shoal-names-'));
afterAll(() => rm(root, { recursive: true, force: true }));

const CLEAR = 'clear\u001b[2J\u001b[H.txt';
const FORGED = 'two\n1000 documents: 1000 indexed, 0 failed.txt';
const docs = join(root, 'docs');
await mkdir(docs);
// Empty files fail (DOCUMENT_EMPTY), so the summary names them.
await writeFile(join(docs, CLEAR), '');
await writeFile(join(docs, FORGED), '');
await writeFile(join(docs, 'fine.txt'), 'The pilot boards at dawn. The tide turns at noon.');

/** Anything a terminal acts on: C0 (newline aside, which ends lines), DEL, C1. */
const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

describe('file names in what shoal ingest prints', () => {
  it('escapes control characters and newlines of file names in the summary and in errors', async () => {
    const run = await runShoal(['ingest', '--no-progress', '--model', MODEL, '--index', `file://${join(root, 'index')}`, docs]);
    // Two documents failed: exit 3 (partial), the good one indexed.
    expect(run.code, run.stderr).toBe(3);
    expect(CONTROL.test(run.stdout)).toBe(false);
    expect(CONTROL.test(run.stderr)).toBe(false);
    const lines = run.stdout.split('\n').filter((line) => line !== '');
    expect(lines[0]).toMatch(/^3 documents: 1 indexed, 2 failed/);
    // Each failure on one line, its name escaped; no forged summary line.
    expect(lines.filter((line) => line.startsWith('  failed '))).toHaveLength(2);
    expect(run.stdout).toContain(`failed ${join(docs, 'clear\\x1b[2J\\x1b[H.txt')}: [DOCUMENT_EMPTY]`);
    expect(run.stdout).toContain(`failed ${join(docs, 'two\\n1000 documents: 1000 indexed, 0 failed.txt')}: [DOCUMENT_EMPTY]`);
    expect(lines.some((line) => line.startsWith('1000 documents'))).toBe(false);

    // A path that does not exist, named on the command line: the error escapes it too.
    const missing = await runShoal(['ingest', '--no-progress', '--model', MODEL, '--index', `file://${join(root, 'index')}`, join(root, `gone\u001b]0;owned\u0007\nerror [OK]: fine`)]);
    expect(missing.code).not.toBe(0);
    expect(CONTROL.test(missing.stderr)).toBe(false);
    expect(missing.stderr.split('\n').filter((line) => line.startsWith('error ['))).toHaveLength(1);
  }, 60_000);

  it('printable escapes C0, DEL, C1, separators and bidirectional overrides, and nothing else', () => {
    expect(printable('a\u001b[2Jb\nc\td\r\u007f\u009b\u2028\u202e\u2066é中')).toBe('a\\x1b[2Jb\\nc\\td\\r\\x7f\\x9b\\u2028\\u202e\\u2066é中');
  });
});
