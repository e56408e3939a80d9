import type { ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { exited, INGEST_ENV, readRows, startWorkerProcess } from '../helpers/ingest-nats.js';
import { natsServerAvailable, NATS_SERVER_MISSING, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, uniquePrefix } from '../helpers/nats-worker.js';
import { shoalInProcess, type InProcessRun } from '../helpers/shoal-in-process.js';

/**
 * `shoal ingest --nats --prune`: the coordinator (the real command tree, in the test process)
 * with one real `shoal worker --parse` process on a private nats-server. A folder is ingested
 * over NATS, a file is deleted, and the re-run with --prune deletes exactly that file's rows,
 * the others' rows staying as they were (ids and vectors).
 */

const Summary = z.object({
  documents: z.object({ total: z.number(), ok: z.number(), failed: z.number(), unchanged: z.number() }),
  removed: z.number(),
});

function summaryOf(run: InProcessRun): z.infer<typeof Summary> {
  return Summary.parse(JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}'));
}

describe.skipIf(!natsServerAvailable())('shoal ingest --nats --prune', () => {
  let server: NatsServerHandle;
  let worker: ChildProcess;
  let root: string;
  const prefix = uniquePrefix('ingestprune');

  beforeAll(async () => {
    server = await startNatsServer();
    root = await mkdtemp(join(tmpdir(), 'shoal-ingest-prune-nats-'));
    worker = startWorkerProcess(server.url, prefix);
  }, 30_000);

  afterAll(async () => {
    worker.kill('SIGTERM');
    await exited(worker);
    await server?.stop();
    await rm(root, { recursive: true, force: true });
  }, 30_000);

  it(natsServerAvailable() ? 'deletes exactly the rows of a file deleted from the folder' : NATS_SERVER_MISSING, async () => {
    const dir = join(root, 'docs');
    await mkdir(dir);
    const [a, b] = [join(dir, 'a.txt'), join(dir, 'b.txt')];
    await writeFile(a, 'Alpha notes about tide tables and harbour pilots.\n\nA second paragraph on moorings.');
    await writeFile(b, 'Beta notes about lighthouse lenses.');
    const index = join(root, 'index');
    const ingest = (extra: readonly string[]): Promise<InProcessRun> =>
      shoalInProcess(['ingest', dir, '--no-progress', '--model', TINY_MEAN, '--index', index, '--json', '--nats', server.url, ...extra], {
        env: { ...INGEST_ENV, SHOAL_SUBJECT_PREFIX: prefix },
      });

    const first = await ingest([]);
    expect(first.code, first.stderr).toBe(0);
    expect(summaryOf(first)).toMatchObject({ documents: { total: 2, ok: 2 }, removed: 0 });
    const before = await readRows(index);
    expect(new Set(before.map((row) => row.source))).toEqual(new Set([a, b]));

    await rm(b);
    const pruned = await ingest(['--prune']);
    expect(pruned.code, pruned.stderr).toBe(0);
    expect(summaryOf(pruned)).toMatchObject({ documents: { total: 1, ok: 0, unchanged: 1 }, removed: 1 });
    expect(await readRows(index)).toEqual(before.filter((row) => row.source === a));
  }, 240_000);
});
