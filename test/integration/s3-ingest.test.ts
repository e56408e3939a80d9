import { copyFile, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { S3Store } from '../../adapters/object-store/index.js';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import { fileSources } from '../../pipelines/documents/sources.js';
import { runShoal } from '../helpers/shoal-cli.js';
import { FIXTURES_DIR, REPO_ROOT } from '../helpers/shared.js';
import { startS3Server, type S3ServerHandle } from '../helpers/s3-server.js';

/**
 * `shoal ingest s3://bucket/prefix` end to end: the real CLI against a private s3rver holding
 * files of examples/docs, the tiny fixture model, LanceDB indexes in a temp folder. The S3 run
 * ends with the same rows as ingesting the same files from a local folder; a second run finds
 * everything unchanged; globs match keys relative to the prefix (checked on the source listing
 * in process, where each CLI run would cost an engine start).
 */

const BUCKET = 'shoal-docs';
const EXAMPLES = join(REPO_ROOT, 'examples', 'docs');
const FILES = [
  ['ostmund-fish-market.pdf', 'ostmund-fish-market.pdf'],
  ['velmora-pilotage.pdf', 'velmora-pilotage.pdf'],
  ['pilot-boat-maintenance.md', 'notes/pilot-boat-maintenance.md'],
] as const;

const Summary = z.object({
  documents: z.object({ total: z.number(), ok: z.number(), failed: z.number(), unchanged: z.number() }),
  failed: z.array(z.object({ source: z.string(), code: z.string(), reason: z.string() })),
  chunks: z.number(),
});

const Row = z.object({ id: z.string(), source: z.string(), page: z.number(), chunk: z.number(), text: z.string() });

async function readRows(index: string): Promise<z.infer<typeof Row>[]> {
  const db = await lancedb.connect(index);
  const table = await db.openTable('chunks');
  const rows: unknown[] = await table.query().toArray();
  table.close();
  db.close();
  return rows.map((row) => Row.parse(row));
}

describe('shoal ingest s3://', () => {
  let server: S3ServerHandle;
  let root: string;
  let local: string;

  beforeAll(async () => {
    server = await startS3Server([BUCKET]);
    root = await mkdtemp(join(tmpdir(), 'shoal-s3-ingest-'));
    local = join(root, 'docs');
    const store = new S3Store(server.settings());
    try {
      for (const [file, key] of FILES) {
        await mkdir(join(local, key, '..'), { recursive: true });
        await copyFile(join(EXAMPLES, file), join(local, key));
        await store.write({ bucket: BUCKET, key: `docs/${key}` }, await readFile(join(EXAMPLES, file)));
      }
      // Beside the prefix, not under it: `docs2/` must not be listed as part of `docs`.
      await store.write({ bucket: BUCKET, key: 'docs2/stray.md' }, Buffer.from('# Not part of docs\n'));
    } finally {
      store.close();
    }
  });

  afterAll(async () => {
    await server?.stop();
    await rm(root, { recursive: true, force: true });
  });

  function ingest(paths: readonly string[], index: string, extra: readonly string[] = []): ReturnType<typeof runShoal> {
    return runShoal(['ingest', ...paths, '--no-progress', '--model', 'tiny-bert-mean', '--index', index, '--json', ...extra], {
      env: { SHOAL_MODEL_DIR: join(FIXTURES_DIR, 'models'), HF_HUB_OFFLINE: '1', ...server.env() },
    });
  }

  it('ingests s3://bucket/docs with the same rows as the local folder, and a second run adds nothing', async () => {
    const s3Index = join(root, 'idx-s3');
    const localIndex = join(root, 'idx-local');
    const [fromS3, fromLocal] = await Promise.all([ingest([`s3://${BUCKET}/docs`], s3Index), ingest([local], localIndex)]);
    expect(fromS3.code, fromS3.stderr).toBe(0);
    expect(fromLocal.code, fromLocal.stderr).toBe(0);
    const s3Summary = Summary.parse(JSON.parse(fromS3.stdout));
    const localSummary = Summary.parse(JSON.parse(fromLocal.stdout));
    expect(s3Summary.documents).toEqual({ total: 3, ok: 3, failed: 0, unchanged: 0 });
    expect(s3Summary.chunks).toBe(localSummary.chunks);
    expect(s3Summary.chunks).toBeGreaterThan(3);

    const s3Rows = await readRows(s3Index);
    const localRows = await readRows(localIndex);
    expect(s3Rows).toHaveLength(localRows.length);
    expect(new Set(s3Rows.map((row) => row.source))).toEqual(new Set(FILES.map(([, key]) => `s3://${BUCKET}/docs/${key}`)));
    const content = (rows: z.infer<typeof Row>[]): string[] => rows.map((row) => `${row.source.split('/').pop()}|${row.page}|${row.chunk}|${row.text}`).sort();
    expect(content(s3Rows)).toEqual(content(localRows));

    const again = await ingest([`s3://${BUCKET}/docs`], s3Index);
    expect(again.code, again.stderr).toBe(0);
    expect(Summary.parse(JSON.parse(again.stdout)).documents).toEqual({ total: 3, ok: 0, failed: 0, unchanged: 3 });
    expect(await readRows(s3Index)).toHaveLength(s3Rows.length);
  }, 120_000);

  it('matches --include/--exclude against keys relative to the prefix, reads lazily, and refuses an empty prefix', async () => {
    const store = new S3Store(server.settings());
    try {
      const uris = async (paths: readonly string[], select: { include?: string[]; exclude?: string[]; maxBytes?: number } = {}): Promise<string[]> =>
        (await fileSources(paths, { ...select, s3: () => store })).map((source) => source.uri);
      const all = FILES.map(([, key]) => `s3://${BUCKET}/docs/${key}`).sort();
      expect(await uris([`s3://${BUCKET}/docs`])).toEqual(all);
      expect(await uris([`s3://${BUCKET}/docs/`])).toEqual(all);
      expect(await uris([`s3://${BUCKET}/docs`], { include: ['notes/**'] })).toEqual([`s3://${BUCKET}/docs/notes/pilot-boat-maintenance.md`]);
      expect(await uris([`s3://${BUCKET}/docs`], { exclude: ['*.pdf'] })).toEqual([`s3://${BUCKET}/docs/notes/pilot-boat-maintenance.md`]);
      expect(await uris([`s3://${BUCKET}/docs/velmora-pilotage.pdf`])).toEqual([`s3://${BUCKET}/docs/velmora-pilotage.pdf`]);
      // Local paths and s3:// mix in one call, in the order given.
      expect((await uris([join(local, 'notes'), `s3://${BUCKET}/docs/velmora-pilotage.pdf`]))[1]).toBe(`s3://${BUCKET}/docs/velmora-pilotage.pdf`);

      const [pdf] = await fileSources([`s3://${BUCKET}/docs/velmora-pilotage.pdf`], { s3: () => store });
      const loaded = await pdf?.load();
      expect(Buffer.from(loaded?.bytes ?? []).equals(await readFile(join(EXAMPLES, 'velmora-pilotage.pdf')))).toBe(true);
      const [tooLarge] = await fileSources([`s3://${BUCKET}/docs/velmora-pilotage.pdf`], { s3: () => store, maxBytes: 1000 });
      await expect(tooLarge?.load()).rejects.toMatchObject({ code: ErrorCode.DOCUMENT_TOO_LARGE });
    } finally {
      store.close();
    }

    const missing = await ingest([`s3://${BUCKET}/no-such-prefix`], join(root, 'idx-none'));
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('error [INVALID_INPUT]: s3://shoal-docs/no-such-prefix: no objects under this prefix');
  }, 120_000);
});
