import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { JsonlStore } from '../../adapters/stores/file/store.js';
import { LanceDbStore } from '../../adapters/stores/lancedb/store.js';
import type { Store } from '../../adapters/stores/store.js';
import { FIXTURE_MODELS_DIR, TINY_MEAN } from '../helpers/nats-worker.js';
import { DATA_DIR } from '../helpers/shared.js';
import { shoalInProcess, type InProcessRun } from '../helpers/shoal-in-process.js';

/**
 * `shoal ingest --prune` in process, through the real command tree (run in the test process) on
 * the tiny fixture encoder: a folder is ingested, a file is deleted, and only a run with --prune
 * deletes exactly that file's rows and state, for LanceDB (the default) and the JSON Lines
 * `file://` backend. The safety rules:
 * a single file named on the command line is never a root, a failed document under a root stops
 * its prune, and --include/--exclude bound what may be pruned. (--nats: ingest-prune-nats.test.ts.)
 */

const ENV = { SHOAL_MODEL_DIR: FIXTURE_MODELS_DIR };
const LOCKED_PDF = join(DATA_DIR, 'pdfs', '005-libreoffice-writer-password__libreoffice-writer-password.pdf');
const root = await mkdtemp(join(tmpdir(), 'shoal-ingest-prune-'));
afterAll(() => rm(root, { recursive: true, force: true }));

const Summary = z.object({
  documents: z.object({ total: z.number(), ok: z.number(), failed: z.number(), unchanged: z.number() }),
  chunks: z.number(),
  removed: z.number(),
});

function summaryOf(run: InProcessRun): z.infer<typeof Summary> {
  return Summary.parse(JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}'));
}

function ingest(index: string, args: readonly string[]): Promise<InProcessRun> {
  return shoalInProcess(['ingest', '--no-progress', '--model', TINY_MEAN, '--index', index, '--json', ...args], { env: ENV });
}

/** A folder of three text documents (one in a subfolder) and its file paths. */
async function makeFolder(name: string): Promise<{ dir: string; a: string; b: string; c: string }> {
  const dir = join(root, name);
  await mkdir(join(dir, 'sub'), { recursive: true });
  const paths = { dir, a: join(dir, 'a.txt'), b: join(dir, 'b.txt'), c: join(dir, 'sub', 'c.md') };
  await writeFile(paths.a, 'Alpha notes about tide tables and harbour pilots.\n\nA second paragraph on moorings.');
  await writeFile(paths.b, 'Beta notes about lighthouse lenses.');
  await writeFile(paths.c, '# Gamma\n\nGamma notes about buoys and channel marks.');
  return paths;
}

/** Rows per source and the sources that have a state, read through the backend's own Store. */
async function indexed(sink: Store, sources: readonly string[]): Promise<{ rows: Record<string, number>; states: string[] }> {
  const rows: Record<string, number> = {};
  for (const source of sources) rows[source] = await sink.count(`source = '${source}'`);
  const states = [...(await sink.states(sources)).keys()].sort();
  await sink.close();
  return { rows, states };
}

describe('shoal ingest --prune', () => {
  for (const backend of ['lancedb', 'file'] as const) {
    it(`${backend}: deletes exactly the rows and state of a deleted file, only with --prune`, async () => {
      const { dir, a, b, c } = await makeFolder(`docs-${backend}`);
      const folder = join(root, `index-${backend}`);
      const index = backend === 'file' ? `file://${folder}` : folder;
      const open = (): Store => (backend === 'file' ? new JsonlStore({ dir: folder }) : new LanceDbStore({ dir: folder }));

      const first = await ingest(index, [dir]);
      expect(first.code, first.stderr).toBe(0);
      expect(summaryOf(first)).toMatchObject({ documents: { total: 3, ok: 3, failed: 0, unchanged: 0 }, removed: 0 });
      const before = await indexed(open(), [a, b, c]);
      expect(before.states).toEqual([a, b, c].sort());
      for (const source of [a, b, c]) expect(before.rows[source]).toBeGreaterThan(0);

      await rm(b);
      // Without --prune the deleted file's rows stay.
      const plain = await ingest(index, [dir]);
      expect(plain.code, plain.stderr).toBe(0);
      expect(summaryOf(plain)).toMatchObject({ documents: { total: 2, ok: 0, unchanged: 2 }, removed: 0 });
      expect(await indexed(open(), [a, b, c])).toEqual(before);

      const pruned = await ingest(index, [dir, '--prune']);
      expect(pruned.code, pruned.stderr).toBe(0);
      expect(summaryOf(pruned)).toMatchObject({ documents: { total: 2, ok: 0, unchanged: 2 }, removed: 1 });
      expect(await indexed(open(), [a, b, c])).toEqual({ rows: { ...before.rows, [b]: 0 }, states: [a, c].sort() });

      // Nothing more to prune; and the file put back is ingested anew (its state went with its rows).
      const again = await ingest(index, [dir, '--prune']);
      expect(summaryOf(again)).toMatchObject({ documents: { total: 2, unchanged: 2 }, removed: 0 });
      await writeFile(b, 'Beta notes about lighthouse lenses.');
      const back = await ingest(index, [dir, '--prune']);
      expect(summaryOf(back)).toMatchObject({ documents: { total: 3, ok: 1, unchanged: 2 }, removed: 0 });
      expect(await indexed(open(), [a, b, c])).toEqual(before);
    }, 240_000);
  }

  it('never prunes through a single file, a root with a failed document, or outside --include', async () => {
    const { dir, a, b, c } = await makeFolder('docs-safety');
    const index = join(root, 'index-safety');
    const open = (): Store => new LanceDbStore({ dir: index });
    expect((await ingest(index, [dir])).code).toBe(0);
    const before = await indexed(open(), [a, b, c]);
    await rm(b);

    // A single file is not a root: nothing is deleted, and the run says why.
    const single = await ingest(index, [a, '--prune']);
    expect(single.code, single.stderr).toBe(0);
    expect(summaryOf(single).removed).toBe(0);
    expect(single.stderr).toContain('--prune: no folder or s3:// prefix was given');
    expect(await indexed(open(), [a, b, c])).toEqual(before);

    // A document under the root fails (encrypted PDF): that root is left alone.
    const locked = join(dir, 'locked.pdf');
    await copyFile(LOCKED_PDF, locked);
    const failing = await ingest(index, [dir, '--prune']);
    expect(failing.code).toBe(3);
    expect(summaryOf(failing)).toMatchObject({ documents: { failed: 1 }, removed: 0 });
    expect(failing.stderr).toContain(`--prune left ${dir} alone: 1 document(s) under it failed`);
    expect(await indexed(open(), [a, b, c])).toEqual(before);
    await rm(locked);

    // Only what --include selects may go: sub/c.md is not seen by this run, but not selected either.
    const included = await ingest(index, [dir, '--include', '*.txt', '--prune']);
    expect(included.code, included.stderr).toBe(0);
    expect(summaryOf(included)).toMatchObject({ documents: { total: 1, unchanged: 1 }, removed: 1 });
    expect(await indexed(open(), [a, b, c])).toEqual({ rows: { ...before.rows, [b]: 0 }, states: [a, c].sort() });

    // A folder with nothing left in it is left alone (an unmounted volume looks the same).
    const empty = join(root, 'docs-empty');
    await mkdir(empty);
    await writeFile(join(empty, 'x.txt'), 'A note that will be deleted.');
    expect((await ingest(index, [empty])).code).toBe(0);
    await rm(join(empty, 'x.txt'));
    const emptied = await ingest(index, [empty, '--prune']);
    expect(summaryOf(emptied).removed).toBe(0);
    expect(emptied.stderr).toContain('no document was found under it');
    expect((await indexed(open(), [join(empty, 'x.txt')])).states).toEqual([join(empty, 'x.txt')]);
  }, 240_000);
});
