import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readdirSync, rmSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { freePort } from '../helpers/nats-server.js';
import { FIXTURES_DIR, REPO_ROOT } from '../helpers/shared.js';
import { runShoal, SHOAL_BIN } from '../helpers/shoal-cli.js';
import { startShoal } from '../helpers/shoal-process.js';
import { CLI_FROM_SOURCE } from '../helpers/cli-build.js';

/**
 * Mistakes from a first-hour audit of `shoal ingest` / `search` / `pipelines show`, run as child
 * processes: each must be one `error [CODE]: ...` line naming the problem with the documented
 * exit status (2: fix the command line), never a stack trace, an INTERNAL error or a silent
 * "0 documents" success.
 */

const ENV = { SHOAL_MODEL_DIR: join(FIXTURES_DIR, 'models'), HF_HUB_OFFLINE: '1' };
const MODEL = ['--model', 'tiny-bert-mean'];
const Summary = z.looseObject({ documents: z.strictObject({ total: z.number(), ok: z.number(), failed: z.number(), unchanged: z.number() }) });

let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'shoal-cli-mistakes-'));
  mkdirSync(join(work, 'empty'));
  mkdirSync(join(work, 'notes'));
  writeFileSync(join(work, 'notes', 'a.txt'), 'The pilot boat leaves at dawn.');
  writeFileSync(join(work, 'a-file'), 'not a folder');
  writeFileSync(join(work, 'tree.txt'), 'Apparel > Shoes\nHome > Kitchen\n');
  writeFileSync(join(work, 'products.jsonl'), `${JSON.stringify({ uniq_id: 'p1', title: 'red running shoe' })}\n${JSON.stringify({ uniq_id: 'p2', title: 'frying pan' })}\n`);
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** The error line of a failed run: exactly one, no stack frames. */
function errorLine(stderr: string): string {
  expect(stderr).not.toMatch(/^\s+at /m);
  const lines = stderr.split('\n').filter((line) => line.startsWith('error ['));
  expect(lines, stderr).toHaveLength(1);
  return lines[0] ?? '';
}

describe('shoal ingest with nothing to ingest', () => {
  it('an empty folder, a glob that matches nothing and an empty pipe are exit 2, and no index is created', async () => {
    const index = join(work, 'idx-nothing');
    const [folder, glob, stdin] = await Promise.all([
      runShoal(['ingest', join(work, 'empty'), ...MODEL, '--index', index], { env: ENV }),
      runShoal(['ingest', join(work, 'notes'), '--include', '*.pdf', ...MODEL, '--index', index], { env: ENV }),
      runShoal(['ingest', ...MODEL, '--index', index], { env: ENV, stdin: '' }),
    ]);
    expect(folder.code, folder.stderr).toBe(2);
    expect(errorLine(folder.stderr)).toBe(`error [INVALID_INPUT]: nothing to ingest: no files in ${join(work, 'empty')} (see shoal ingest --help)`);
    expect(glob.code, glob.stderr).toBe(2);
    expect(errorLine(glob.stderr)).toBe(`error [INVALID_INPUT]: nothing to ingest: no files selected by --include '*.pdf' in ${join(work, 'notes')} (see shoal ingest --help)`);
    expect(stdin.code, stdin.stderr).toBe(2);
    expect(errorLine(stdin.stderr)).toBe('error [INVALID_INPUT]: nothing to ingest: no JSON Lines records on stdin (see shoal ingest --help)');
    for (const run of [folder, glob, stdin]) expect(run.stdout).toBe('');
    expect(readdirSync(work)).not.toContain('idx-nothing');
  }, 120_000);
});

describe('shoal ingest where every document fails', () => {
  it('says so (exit 3) instead of "1 of 1 documents failed; the others are indexed"', async () => {
    const empty = join(work, 'empty.txt');
    writeFileSync(empty, '');
    const run = await runShoal(['ingest', empty, ...MODEL, '--index', join(work, 'idx-failed')], { env: ENV });
    expect(run.code, run.stderr).toBe(3);
    expect(run.stdout).toContain(`failed ${empty}: [DOCUMENT_EMPTY]`);
    expect(errorLine(run.stderr)).toBe('error [PARTIAL_FAILURE]: the document failed; nothing was indexed');
  }, 120_000);
});

describe('shoal ingest naming a named pipe, a device or an oversized file', () => {
  it('each fails alone before it is read (a pipe or /dev/zero would block or never end); the others are indexed', async () => {
    const fifo = join(work, 'pipe.txt');
    execFileSync('mkfifo', [fifo]);
    const big = join(work, 'big.txt');
    // Sparse: 2 GiB + 1 byte on no disk space, over the default maxBytes and over what readFile could load.
    writeFileSync(big, '');
    truncateSync(big, 2 ** 31 + 1);
    const run = await runShoal(['ingest', fifo, '/dev/zero', big, join(work, 'notes'), ...MODEL, '--index', join(work, 'idx-special'), '--json'], { env: ENV });
    expect(run.code, run.stderr).toBe(3);
    const summary = JSON.parse(run.stdout) as { documents: { ok: number; failed: number }; failed: { source: string; code: string; reason: string }[] };
    expect(summary.documents).toMatchObject({ ok: 1, failed: 3 });
    expect(summary.failed).toEqual([
      { source: fifo, code: 'READ_FAILED', reason: `${fifo} is not a regular file (a named pipe)` },
      { source: '/dev/zero', code: 'READ_FAILED', reason: '/dev/zero is not a regular file (a device)' },
      { source: big, code: 'DOCUMENT_TOO_LARGE', reason: `the document has ${2 ** 31 + 1} bytes, over the limit of 104857600 bytes (maxBytes)` },
    ]);
  }, 120_000);
});

describe('shoal search on a folder that is not an index', () => {
  it('says there is no table and leaves the folder as it was (reading never writes)', async () => {
    const before = readdirSync(join(work, 'notes'));
    const run = await runShoal(['search', 'pilot', '--index', join(work, 'notes')], { env: ENV });
    expect(run.code, run.stderr).toBe(1);
    expect(errorLine(run.stderr)).toMatch(/^error \[NOT_FOUND\]: no table "chunks" in /);
    expect(readdirSync(join(work, 'notes'))).toEqual(before);
  }, 60_000);
});

describe('shoal search with an unquoted query or a bad --k', () => {
  it('says to quote the query, and gives --k its range whatever the value', async () => {
    const index = join(work, 'idx-any');
    const [unquoted, zero, negative] = await Promise.all([
      runShoal(['search', 'pilot', 'boat', '--index', index], { env: ENV }),
      runShoal(['search', 'pilot', '--k', '0', '--index', index], { env: ENV }),
      runShoal(['search', 'pilot', '--k', '-1', '--index', index], { env: ENV }),
    ]);
    expect(unquoted.code).toBe(2);
    expect(errorLine(unquoted.stderr)).toBe(`error [INVALID_INPUT]: too many arguments for 'search'. Expected 1 argument but got 2. Quote a query of several words: shoal search "pilot boat" (see --help)`);
    for (const run of [zero, negative]) {
      expect(run.code).toBe(2);
      expect(errorLine(run.stderr)).toContain('--k: must be a whole number from 1 to 1000');
    }
  }, 60_000);
});

describe('a mistyped subcommand of a command group, and a bad flag of one', () => {
  it('is an unknown command named in full with a suggestion, as at the top level, not "too many arguments" (exit 2)', async () => {
    const [models, index, runs, documents] = await Promise.all([
      runShoal(['models', 'lst'], { env: ENV }),
      runShoal(['index', 'stat', '--index', join(work, 'idx-any')], { env: ENV }),
      runShoal(['runs', 'zzzzzz'], { env: ENV }),
      runShoal(['index', 'documents', '--limit', '0', '--index', join(work, 'idx-any')], { env: ENV }),
    ]);
    for (const run of [models, index, runs, documents]) {
      expect(run.code, run.stderr).toBe(2);
      expect(run.stdout).toBe('');
    }
    expect(errorLine(models.stderr)).toBe("error [INVALID_INPUT]: unknown command 'models lst'; did you mean models list? (see shoal models --help)");
    expect(errorLine(index.stderr)).toBe("error [INVALID_INPUT]: unknown command 'index stat'; did you mean index stats? (see shoal index --help)");
    expect(errorLine(runs.stderr)).toBe("error [INVALID_INPUT]: unknown command 'runs zzzzzz' (see shoal runs --help)");
    // The subcommand's flags are named with its group: there is no `shoal documents`.
    expect(errorLine(documents.stderr)).toBe('error [INVALID_INPUT]: shoal index documents: --limit: must be a whole number from 1 to 1000 (see shoal index documents --help)');
  }, 60_000);
});

describe('a --nats value that is not a NATS URL', () => {
  it('is a bad command line (exit 2) saying what a NATS URL looks like, before any connection attempt', async () => {
    const runs = await Promise.all([
      runShoal(['ingest', join(work, 'notes'), '--nats', 'notaurl', ...MODEL, '--index', join(work, 'idx-nats')], { env: ENV }),
      // A server used to retry such a "host" for ever; now it stops at once.
      runShoal(['worker', '--nats', 'notaurl', '--models', 'tiny-bert-mean'], { env: ENV }),
      runShoal(['sink', '--nats', 'nats://127.0.0.1:4222,notaurl', '--dir', join(work, 'sink-nats')], { env: ENV }),
    ]);
    const [ingest, worker, sink] = runs;
    for (const run of runs) expect(run.code, run.stderr).toBe(2);
    expect(errorLine(ingest?.stderr ?? '')).toBe('error [INVALID_INPUT]: shoal ingest: --nats: must be nats://host:port (or tls://, ws://, wss://), comma-separated for several servers (see shoal ingest --help)');
    expect(errorLine(worker?.stderr ?? '')).toContain('shoal worker: --nats: must be nats://host:port');
    expect(errorLine(sink?.stderr ?? '')).toContain('shoal sink: --nats: must be nats://host:port');
    for (const run of runs) expect(run.stderr).not.toContain('connecting to');
    expect(readdirSync(work)).not.toContain('idx-nats');
  }, 60_000);
});

describe('shoal help into a pipe closed early', () => {
  it('exits 0 without a stack trace (shoal help encode | head -1)', () => {
    for (let round = 0; round < 3; round++) {
      const stderr = join(work, 'help-stderr');
      const out = execFileSync('bash', ['-c', `"${process.execPath}" "${SHOAL_BIN}" help encode 2>"${stderr}" | head -1 >/dev/null; status=\${PIPESTATUS[0]}; cat "${stderr}"; echo "status=$status"`], { encoding: 'utf8', env: { ...process.env, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE } });
      expect(out).not.toContain('EPIPE');
      expect(out.trim().split('\n').pop()).toBe('status=0');
    }
  });
});

describe('shoal ingest --model given as a relative folder', () => {
  it('records the folder as an absolute path, so shoal search works from another folder', async () => {
    const model = relative(work, join(FIXTURES_DIR, 'models', 'tiny-bert-mean'));
    expect(model.startsWith('..')).toBe(true);
    const index = join(work, 'idx-relative-model');
    const ingest = await runShoal(['ingest', join(work, 'notes'), '--model', model, '--index', index], { env: { HF_HUB_OFFLINE: '1' }, cwd: work });
    expect(ingest.code, ingest.stderr).toBe(0);
    const search = await runShoal(['search', 'pilot boat', '--index', index, '--k', '1'], { env: { HF_HUB_OFFLINE: '1' }, cwd: tmpdir() });
    expect(search.code, search.stderr).toBe(0);
    expect(search.stdout).toContain('The pilot boat leaves at dawn.');
  }, 120_000);
});

describe('shoal ingest of a document that changed into a failing one', () => {
  it('removes the rows of its earlier content (no stale rows), says so, and exits 3', async () => {
    const folder = join(work, 'changing');
    mkdirSync(folder);
    writeFileSync(join(folder, 'keep.txt'), 'The pilot boat leaves at dawn.');
    writeFileSync(join(folder, 'gone.txt'), 'The harbour office opens at nine.');
    const index = join(work, 'idx-changing');
    const first = await runShoal(['ingest', folder, ...MODEL, '--index', index], { env: ENV });
    expect(first.code, first.stderr).toBe(0);
    writeFileSync(join(folder, 'gone.txt'), '');
    const again = await runShoal(['ingest', folder, ...MODEL, '--index', index, '--json'], { env: ENV });
    expect(again.code, again.stderr).toBe(3);
    const summary = z.looseObject({ failed: z.array(z.object({ source: z.string(), code: z.string(), reason: z.string() })) }).parse(JSON.parse(again.stdout));
    expect(summary.failed).toEqual([{ source: join(folder, 'gone.txt'), code: 'DOCUMENT_EMPTY', reason: expect.stringMatching(/; the rows of its earlier content were removed$/) }]);
    const search = await runShoal(['search', 'harbour office', '--index', index, '--k', '10'], { env: ENV });
    expect(search.code, search.stderr).toBe(0);
    expect(search.stdout).toContain('keep.txt');
    expect(search.stdout).not.toContain('gone.txt');
    // Emptied again: nothing more to remove, a plain failure.
    const third = await runShoal(['ingest', folder, ...MODEL, '--index', index, '--json'], { env: ENV });
    expect(third.stdout).not.toContain('earlier content');
  }, 180_000);
});

describe('shoal ingest . walking a folder', () => {
  it('skips dot files and its own index, follows links once (a loop ends), and --hidden takes dot files', async () => {
    const folder = join(work, 'walked');
    mkdirSync(join(folder, '.git'), { recursive: true });
    mkdirSync(join(folder, 'sub'));
    writeFileSync(join(folder, 'a.txt'), 'The pilot boat leaves at dawn.');
    writeFileSync(join(folder, '.env'), 'TOKEN=abc');
    writeFileSync(join(folder, '.git', 'config'), '[core]');
    symlinkSync(join(folder, 'a.txt'), join(folder, 'sub', 'alias.txt'));
    symlinkSync(folder, join(folder, 'sub', 'loop'));
    // The default index, ./shoal-index, lies inside the folder ingested.
    const first = await runShoal(['ingest', '.', ...MODEL, '--json'], { env: ENV, cwd: folder });
    expect(first.code, first.stderr).toBe(0);
    expect(Summary.parse(JSON.parse(first.stdout)).documents).toEqual({ total: 2, ok: 2, failed: 0, unchanged: 0 });
    // Run again: the index written by the first run is not a document of the second.
    const again = await runShoal(['ingest', '.', ...MODEL, '--json'], { env: ENV, cwd: folder });
    expect(Summary.parse(JSON.parse(again.stdout)).documents).toEqual({ total: 2, ok: 0, failed: 0, unchanged: 2 });
    const hidden = await runShoal(['ingest', '.', '--hidden', ...MODEL, '--json'], { env: ENV, cwd: folder });
    expect(Summary.parse(JSON.parse(hidden.stdout)).documents).toEqual({ total: 4, ok: 2, failed: 0, unchanged: 2 });
  }, 180_000);
});

describe('shoal ingest / search / pipelines show: bad names and paths are exit 2', () => {
  it('an unknown built-in pipeline name is CONFIG_INVALID (exit 2) on ingest and on pipelines show', async () => {
    const [show, ingest] = await Promise.all([
      runShoal(['pipelines', 'show', 'nosuch'], { env: ENV }),
      runShoal(['ingest', join(work, 'notes'), '--pipeline', 'nosuch', ...MODEL, '--index', join(work, 'idx-pipeline')], { env: ENV }),
    ]);
    for (const run of [show, ingest]) {
      expect(run.code, run.stderr).toBe(2);
      expect(errorLine(run.stderr)).toBe('error [CONFIG_INVALID]: no built-in pipeline "nosuch" (built-in: documents; or give a .yaml/.json file)');
    }
  }, 120_000);

  it('a pipeline name from the SHOAL_PIPELINES folder works in pipelines show and an in-process ingest, as in document jobs', async () => {
    const withFolder = { ...ENV, SHOAL_PIPELINES: join(REPO_ROOT, 'examples', 'pipelines') };
    const [show, ingest, missing] = await Promise.all([
      runShoal(['pipelines', 'show', 'tiny'], { env: withFolder }),
      runShoal(['ingest', join(work, 'notes'), '--pipeline', 'tiny', '--index', join(work, 'idx-named-pipeline'), '--json'], { env: withFolder }),
      runShoal(['pipelines', 'show', 'nosuch'], { env: withFolder }),
    ]);
    expect(show.code, show.stderr).toBe(0);
    expect(z.looseObject({ name: z.string(), stages: z.looseObject({ encode: z.looseObject({ model: z.string() }) }) }).parse(JSON.parse(show.stdout))).toMatchObject({ name: 'tiny', stages: { encode: { model: 'tiny-bert-mean' } } });
    expect(ingest.code, ingest.stderr).toBe(0);
    expect(Summary.parse(JSON.parse(ingest.stdout)).documents.failed).toBe(0);
    expect(missing.code, missing.stderr).toBe(2);
    expect(errorLine(missing.stderr)).toMatch(/^error \[CONFIG_INVALID\]: no pipeline named "nosuch" \(built-in: documents; none of nosuch\.yaml, nosuch\.yml, nosuch\.json in .*examples\/pipelines\); or give a \.yaml\/\.json file$/);
  }, 120_000);

  it('a stdin record whose id is also a file on the command line is refused (exit 2): both would be one source and lose its rows', async () => {
    const file = join(work, 'clash.txt');
    writeFileSync(file, 'The pilot boat leaves at dawn.\n');
    const run = await runShoal(['ingest', file, '-', ...MODEL, '--index', join(work, 'idx-clash')], { env: ENV, stdin: `${JSON.stringify({ id: file, text: 'other words' })}\n` });
    expect(run.code, run.stderr).toBe(2);
    expect(errorLine(run.stderr)).toBe(`error [INVALID_INPUT]: stdin record id ${JSON.stringify(file)} is also a file given on the command line: a record's id is its source in the index, so give it another id`);
  }, 120_000);

  it('--index naming a file (or a path below one) is a plain CONFIG_INVALID line on ingest and search, not an INTERNAL EEXIST/ENOTDIR', async () => {
    const file = join(work, 'a-file');
    const [ingest, search] = await Promise.all([
      runShoal(['ingest', join(work, 'notes'), ...MODEL, '--index', file], { env: ENV }),
      runShoal(['search', 'pilot boat', '--index', file], { env: ENV }),
    ]);
    for (const run of [ingest, search]) {
      expect(run.code, run.stderr).toBe(2);
      expect(errorLine(run.stderr)).toBe(`error [CONFIG_INVALID]: index ${file} is a file, not a folder: a LanceDB index is a folder (created when missing)`);
    }
    // Below a file (LanceDB folder or file:// JSON Lines): the same exit 2, the cause on its own line.
    const [lance, jsonl] = await Promise.all([
      runShoal(['ingest', join(work, 'notes'), ...MODEL, '--index', join(file, 'sub')], { env: ENV }),
      runShoal(['ingest', join(work, 'notes'), ...MODEL, '--index', `file://${file}`], { env: ENV }),
    ]);
    expect(lance.code, lance.stderr).toBe(2);
    expect(errorLine(lance.stderr)).toBe(`error [CONFIG_INVALID]: cannot create the index folder ${join(file, 'sub')}`);
    expect(lance.stderr).toContain('cause: ENOTDIR');
    expect(jsonl.code, jsonl.stderr).toBe(2);
    expect(errorLine(jsonl.stderr)).toMatch(/^error \[CONFIG_INVALID\]: cannot create the folder of table chunks in file:\/\/.*a-file/);
  }, 120_000);
});

describe('shoal classify: an id under another name, a --gold field no product has', () => {
  const classify = (extra: readonly string[]) =>
    runShoal(['classify', join(work, 'products.jsonl'), '--taxonomy', join(work, 'tree.txt'), ...MODEL, '--top-k', '1', ...extra], { env: { ...ENV, SHOAL_CACHE_DIR: join(work, 'cache') } });

  it('warns once that uniq_id looks like the id (as the line commands do), and a misspelt --gold is exit 2 after the lines', async () => {
    const [hinted, gold] = await Promise.all([classify([]), classify(['--id-field', 'uniq_id', '--gold', 'categroy', '--out', join(work, 'classified.jsonl')])]);
    expect(hinted.code, hinted.stderr).toBe(0);
    expect(hinted.stderr).toContain('warning: product 1 has no "id" but has "uniq_id": ids will be record numbers; pass --id-field uniq_id to keep them (shown once)');
    expect(hinted.stderr.match(/warning: /g)).toHaveLength(1);
    expect(hinted.stdout.trim().split('\n').map((line) => (JSON.parse(line) as { id: unknown }).id)).toEqual([1, 2]);

    expect(gold.code, gold.stderr).toBe(2);
    expect(errorLine(gold.stderr)).toBe('error [INVALID_INPUT]: --gold categroy: no product has a value in this field, so there is nothing to evaluate (the classifications were written)');
    expect(gold.stdout).toBe('');
    expect(gold.stderr).not.toContain('warning: ');
    expect(readdirSync(work)).toContain('classified.jsonl');
  }, 120_000);
});

describe('shoal sink: a mistyped --index, and a stop while NATS cannot be reached', () => {
  it('refuses an unknown --index scheme at once, before any NATS connection attempt (exit 2)', async () => {
    const port = await freePort();
    const run = await runShoal(['sink', '--index', 'foo://x', '--nats', `nats://127.0.0.1:${port}`], { env: { SHOAL_LOG_LEVEL: 'info' } });
    expect(run.code, run.stderr).toBe(2);
    expect(errorLine(run.stderr)).toMatch(/^error \[INVALID_INPUT\]: --index: unknown scheme "foo:\/\/"/);
    expect(run.stderr).not.toContain('connecting to');
  }, 60_000);

  it('stops on the first SIGTERM while it retries a closed NATS port (exit 0 within 2 s, as a worker)', async ({ onTestFinished }) => {
    const port = await freePort();
    const sink = startShoal(['sink', '--dir', join(work, 'results'), '--nats', `nats://127.0.0.1:${port}`], { env: { SHOAL_LOG_LEVEL: 'info' } });
    onTestFinished(async () => {
      if (sink.child.exitCode === null && sink.child.signalCode === null) await sink.stop('SIGKILL');
    });
    await sink.waitFor(new RegExp(`connecting to nats://127\\.0\\.0\\.1:${port} \\(attempt 2\\)`), 30_000);
    const stopped = await sink.stop('SIGTERM');
    expect(stopped.code, sink.output().slice(-2000)).toBe(0);
    expect(stopped.ms).toBeLessThan(2_000);
  }, 60_000);
});
