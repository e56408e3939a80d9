import { mkdir, mkdtemp, rm, symlink, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PayloadStore } from '../../adapters/nats/connection/payloads.js';
import { ErrorCode, isShoalError, ShoalError } from '../../adapters/protocol/errors.js';
import { MAX_DOCUMENT_BYTES } from '../../adapters/protocol/limits.js';
import { ImagePolicy, readImageInput } from '../../adapters/sources/image-input.js';
import { fileSources } from '../../pipelines/documents/sources.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { testConnection } from '../helpers/nats-worker.js';

/**
 * Issue 42, items 9 and 11: files a caller names under the file roots (file:// payloads and
 * ingest documents, image paths, document files) are opened once and checked on that descriptor.
 * - A link flipped by a racing thread between a file inside the roots and one outside while
 *   hundreds of reads run: the outside content is never returned (each read gives the inside
 *   content or is refused). Before, the path was checked (realpath) and then read by name.
 * - A 400 MB sparse file is refused from its size (DOCUMENT_TOO_LARGE for a document, INPUT_TOO_LARGE
 *   for a payload or image) at once, without its bytes being read into memory.
 */

const INSIDE = 'inside content';
const OUTSIDE = 'OUTSIDE SECRET';
const READS = 600;
/**
 * Flips the reads must overlap: on a loaded machine the flipping thread can be starved while 600
 * quick reads finish, which would race nothing; the reads then go on (up to ten times as many).
 */
const MIN_FLIPS = 20;

/** Reads `read()` many times while the link flips (`flipped()`: flips so far); counts what came back. */
async function raceReads(read: () => Promise<Uint8Array>, flipped: () => number): Promise<{ inside: number; outside: number; refused: number; codes: Set<string> }> {
  const counts = { inside: 0, outside: 0, refused: 0, codes: new Set<string>() };
  const batch = 20;
  for (let done = 0; done < READS || (flipped() < MIN_FLIPS && done < 10 * READS); done += batch) {
    await Promise.all(
      Array.from({ length: batch }, async () => {
        try {
          const text = Buffer.from(await read()).toString('utf8');
          if (text === OUTSIDE) counts.outside += 1;
          else if (text === INSIDE) counts.inside += 1;
          else throw new Error(`unexpected content ${text.slice(0, 40)}`);
        } catch (error) {
          if (!isShoalError(error)) throw error;
          counts.refused += 1;
          counts.codes.add(error.code);
        }
      }),
    );
  }
  return counts;
}

describe('file reads under the roots: opened once, checked on the descriptor', () => {
  let dir: string;
  let root: string;
  let link: string;
  let sparse: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-root-reads-'));
    root = join(dir, 'root');
    await mkdir(root);
    await mkdir(join(dir, 'outside'));
    await writeFile(join(root, 'inside.txt'), INSIDE);
    await writeFile(join(dir, 'outside', 'secret.txt'), OUTSIDE);
    link = join(root, 'link.txt');
    await symlink(join(root, 'inside.txt'), link);
    // 400 MB that cost no disk: a sparse file.
    sparse = join(root, 'sparse.bin');
    await writeFile(sparse, '');
    await truncate(sparse, 400 * 1024 * 1024);
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** Flips the link for the duration of `run`. */
  async function whileSwapping<T>(run: (flipped: () => number) => Promise<T>): Promise<T> {
    // [0]: stop, [1]: flips so far.
    const stop = new SharedArrayBuffer(8);
    const worker = new Worker(
      `const { symlinkSync, renameSync, rmSync } = require('node:fs');
       const { workerData, parentPort } = require('node:worker_threads');
       const stop = new Int32Array(workerData.stop);
       let flips = 0;
       const temporary = workerData.link + '.swap';
       while (Atomics.load(stop, 0) === 0) {
         rmSync(temporary, { force: true });
         symlinkSync(workerData.targets[flips % 2], temporary);
         renameSync(temporary, workerData.link);
         flips += 1;
         Atomics.store(stop, 1, flips);
         if (flips === 2) parentPort.postMessage('flipping');
       }
       parentPort.postMessage(flips);`,
      { eval: true, workerData: { link, targets: [join(root, 'inside.txt'), join(dir, 'outside', 'secret.txt')], stop } },
    );
    const next = (): Promise<unknown> =>
      new Promise((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      });
    // Reads start once the link is flipping, so every read races it.
    await next();
    const flips = next();
    try {
      return await run(() => Atomics.load(new Int32Array(stop), 1));
    } finally {
      Atomics.store(new Int32Array(stop), 0, 1);
      expect(await flips).toBeGreaterThan(2);
      await worker.terminate();
    }
  }

  describe.skipIf(!natsServerAvailable())(`file:// references (payloads, ingest documents) ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
    let server: NatsServerHandle;
    let nc: NatsConnection;
    let payloads: PayloadStore;

    beforeAll(async () => {
      server = await startNatsServer();
      nc = await testConnection(server.url);
      payloads = new PayloadStore(nc, { bucket: 'rootreads_payloads', fileRoots: [root] });
    });

    afterAll(async () => {
      await nc?.close();
      await server?.stop();
    });

    it(`never returns the outside file's content while a link flips under ${READS} reads`, async () => {
      const counts = await whileSwapping((flipped) => raceReads(() => payloads.get(pathToFileURL(link).href), flipped));
      expect(counts.outside).toBe(0);
      // The race ran both ways: reads of the inside file, refusals of the outside one.
      expect(counts.inside).toBeGreaterThan(0);
      expect(counts.refused).toBeGreaterThan(0);
      expect([...counts.codes]).toEqual([ErrorCode.INVALID_INPUT]);
    }, 60_000);

    it('refuses a 400 MB sparse document from its size, at once, holding none of it', async () => {
      const limit = { maxBytes: MAX_DOCUMENT_BYTES, tooLarge: (size: number, ref: string) => new ShoalError(ErrorCode.DOCUMENT_TOO_LARGE, `${ref}: ${size}`, { details: { size } }) };
      const before = process.memoryUsage().rss;
      const started = performance.now();
      const error: unknown = await payloads.get(pathToFileURL(sparse).href, limit).catch((e: unknown) => e);
      const elapsed = performance.now() - started;
      expect(isShoalError(error) ? error.code : error).toBe(ErrorCode.DOCUMENT_TOO_LARGE);
      expect(isShoalError(error) ? error.details?.['size'] : null).toBe(400 * 1024 * 1024);
      expect(elapsed).toBeLessThan(2_000);
      expect(process.memoryUsage().rss - before).toBeLessThan(64 * 1024 * 1024);
      // As a job payload the same file is over its 512 MiB bound only when it is: 400 MB is under, 513 MiB is not.
      await truncate(sparse, 513 * 1024 * 1024);
      const payload: unknown = await payloads.get(pathToFileURL(sparse).href).catch((e: unknown) => e);
      expect(isShoalError(payload) ? payload.code : payload).toBe(ErrorCode.INPUT_TOO_LARGE);
      await truncate(sparse, 400 * 1024 * 1024);
    }, 30_000);
  });

  it(`image paths: never the outside file's bytes while a link flips under ${READS} reads`, async () => {
    const policy = ImagePolicy.parse({ roots: [root] });
    const counts = await whileSwapping((flipped) => raceReads(() => readImageInput({ kind: 'path', path: link }, policy), flipped));
    expect(counts.outside).toBe(0);
    expect(counts.inside).toBeGreaterThan(0);
    expect(counts.refused).toBeGreaterThan(0);
  }, 60_000);

  it('a document file of 400 MB (sparse) fails DOCUMENT_TOO_LARGE from its size, fast, with bounded memory', async () => {
    const [source] = await fileSources([sparse]);
    const before = process.memoryUsage().rss;
    const started = performance.now();
    const error: unknown = await source?.load().catch((e: unknown) => e);
    expect(isShoalError(error) ? error.code : error).toBe(ErrorCode.DOCUMENT_TOO_LARGE);
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(process.memoryUsage().rss - before).toBeLessThan(64 * 1024 * 1024);
  });
});
