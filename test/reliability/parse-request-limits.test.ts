import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { writePdf } from '../../adapters/documents/pdf-writer.js';
import { capParseSettings } from '../../pipelines/documents/parse-limits.js';
import { parseWorkerConfig, workerConfigFromEnv } from '../../services/worker/config.js';
import { CLI_FROM_SOURCE } from '../helpers/cli-build.js';
import { exited, INGEST_ENV } from '../helpers/ingest-nats.js';
import { natsServerAvailable, NATS_SERVER_MISSING, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, uniquePrefix } from '../helpers/nats-worker.js';
import { runShoal, SHOAL_BIN } from '../helpers/shoal-cli.js';

/**
 * Issue 42, item 14 (second part): the limits of a parse task come from whoever started the
 * ingest run, and a request could raise `maxPages` to 1,000,000 (or `maxBytes` to 1 TiB, the OCR
 * resolution to 600 dpi): the parse worker took them as given. Each is now capped by the worker's
 * own setting (SHOAL_PARSE_MAX_PAGES, SHOAL_PARSE_MAX_BYTES, SHOAL_PARSE_MAX_DPI).
 */

const Summary = z.object({
  documents: z.object({ total: z.number(), ok: z.number(), failed: z.number() }),
  failed: z.array(z.object({ source: z.string(), code: z.string(), reason: z.string() })),
});

const page = (text: string): { width: number; height: number; lines: { text: string; x: number; y: number; size: number }[] } => ({ width: 300, height: 300, lines: [{ text, x: 20, y: 40, size: 12 }] });

describe('request-set parse limits', () => {
  it('are lowered to the worker’s ceilings, read from its settings', () => {
    const requested = { ocr: 'auto' as const, ocrModel: 'm', ocrDpi: 600, maxBytes: 2 ** 40, maxPages: 1_000_000 };
    expect(capParseSettings(requested)).toEqual({ ...requested, ocrDpi: 300, maxBytes: 100 * 1024 * 1024, maxPages: 5000 });
    expect(capParseSettings({ ...requested, ocrDpi: 150, maxPages: 10 }, { maxPages: 2 })).toMatchObject({ ocrDpi: 150, maxPages: 2 });
    const config = parseWorkerConfig({ nats: {}, ...workerConfigFromEnv({ SHOAL_PARSE_MAX_PAGES: '2', SHOAL_PARSE_MAX_BYTES: '1000', SHOAL_PARSE_MAX_DPI: '100' }) });
    expect(config.parseLimits).toEqual({ maxPages: 2, maxBytes: 1000, maxDpi: 100 });
    expect(parseWorkerConfig({ nats: {} }).parseLimits).toEqual({ maxPages: 5000, maxBytes: 100 * 1024 * 1024, maxDpi: 300 });
  });

  describe.skipIf(!natsServerAvailable())('over NATS', () => {
    let server: NatsServerHandle;
    let root: string;
    let worker: ChildProcess | null = null;
    const prefix = uniquePrefix('parselimits');

    beforeAll(async () => {
      server = await startNatsServer();
      root = await mkdtemp(join(tmpdir(), 'shoal-parse-limits-'));
    }, 30_000);

    afterAll(async () => {
      if (worker !== null && worker.exitCode === null && worker.signalCode === null) worker.kill('SIGKILL');
      if (worker !== null) await exited(worker);
      await server?.stop();
      await rm(root, { recursive: true, force: true });
    }, 30_000);

    it(natsServerAvailable() ? 'a run asking maxPages 1,000,000 gets the worker’s 2: a 3-page PDF fails alone as DOCUMENT_TOO_LARGE' : NATS_SERVER_MISSING, async () => {
      worker = spawn(process.execPath, [SHOAL_BIN, 'worker', '--parse', '--models', TINY_MEAN, '--nats', server.url, '--prefix', prefix], {
        cwd: tmpdir(),
        env: { ...process.env, ...INGEST_ENV, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, SHOAL_THREADS: '1', SHOAL_LOG_LEVEL: 'warn', SHOAL_PARSE_MAX_PAGES: '2' },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      const docs = join(root, 'docs');
      await mkdir(docs);
      await writeFile(join(docs, 'three.pdf'), writePdf([page('One page of text.'), page('Two pages of text.'), page('Three pages of text.')]));
      await writeFile(join(docs, 'one.pdf'), writePdf([page('A single page of text here.')]));
      const pipeline = join(root, 'pipeline.yaml');
      await writeFile(pipeline, `name: greedy\nstages:\n  parse: {maxPages: 1000000, ocr: never}\n  encode: {model: ${TINY_MEAN}}\n`);
      const run = await runShoal(['ingest', '--no-progress', '--json', '--pipeline', pipeline, '--index', `file://${join(root, 'index')}`, '--nats', server.url, docs], { env: { ...INGEST_ENV, SHOAL_SUBJECT_PREFIX: prefix } });
      const summary = Summary.parse(JSON.parse(run.stdout));
      expect(summary.documents).toMatchObject({ total: 2, ok: 1, failed: 1 });
      expect(summary.failed).toEqual([{ source: join(docs, 'three.pdf'), code: 'DOCUMENT_TOO_LARGE', reason: expect.stringContaining('over the limit of 2 pages') }]);
    }, 90_000);
  });
});
