import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeRgb } from '../../../../adapters/models/image/image-decode.js';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { ImageFetcher, ImagePolicy } from '../../../../adapters/sources/image-input.js';
import { InferenceEngine } from '../../../../pipelines/inference/engine.js';
import { fixtureDir } from '../../../helpers/tiny-model.js';

/**
 * URL images: a slow allowed host delays only the requests that name it (fetches run on the main
 * thread, a few per host, never in the prep thread every request shares), and an image error
 * never echoes the bytes a server sent.
 */

const CLASSIFIER = fixtureDir('tiny-image-classifier');
const SLOW_MS = 2500;
/** What a hostile server answers instead of an image: its bytes must never reach an error message. */
const SECRET = Buffer.from('SECRET-TOKEN-0123456789abcdef');

let server: Server;
let origin: string;
let png: Buffer;
let engine: InferenceEngine;

beforeAll(async () => {
  png = await sharp({ create: { width: 8, height: 8, channels: 3, background: { r: 200, g: 10, b: 10 } } }).png().toBuffer();
  server = createServer((request, response) => {
    if (request.url === '/slow.png') {
      setTimeout(() => {
        response.writeHead(200, { 'content-type': 'image/png' });
        response.end(png);
      }, SLOW_MS);
    } else if (request.url === '/fast.png') {
      response.writeHead(200, { 'content-type': 'image/png' });
      response.end(png);
    } else {
      response.writeHead(200, { 'content-type': 'application/octet-stream' });
      response.end(SECRET);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  engine = new InferenceEngine({ images: { allowedHosts: ['127.0.0.1'] } });
  // Loaded before timing anything.
  await engine.extract({ model: CLASSIFIER, items: [{ image: { base64: png.toString('base64') } }] });
});

afterAll(async () => {
  await engine.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe('URL images', () => {
  it('a slow host does not stall other image requests of the same engine', async () => {
    const started = performance.now();
    const slow = engine.extract({ model: CLASSIFIER, items: [{ image: `${origin}/slow.png` }] }).then(() => performance.now() - started);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const quick = await Promise.all([
      engine.extract({ model: CLASSIFIER, items: [{ image: { base64: png.toString('base64') } }] }),
      engine.extract({ model: CLASSIFIER, items: [{ image: `${origin}/fast.png` }] }),
    ]);
    const quickMs = performance.now() - started;
    expect(quick.map((result) => result.items[0]?.labels?.length ?? 0)).toEqual([expect.any(Number), expect.any(Number)]);
    expect(quickMs).toBeLessThan(SLOW_MS - 500);
    expect(await slow).toBeGreaterThanOrEqual(SLOW_MS - 50);
  });

  it('fetches at most `perHost` at once per host; the rest of that host queue', async () => {
    const policy = ImagePolicy.parse({ allowedHosts: ['127.0.0.1', 'localhost'] });
    const fetcher = new ImageFetcher(1);
    const started = performance.now();
    const first = fetcher.fetch(`${origin}/slow.png`, policy);
    const second = fetcher.fetch(`${origin}/fast.png`, policy).then(() => performance.now() - started);
    // Another host (same server, other name) is not behind the slow one.
    const other = await fetcher.fetch(`${origin.replace('127.0.0.1', 'localhost')}/fast.png`, policy).then(() => performance.now() - started);
    expect(other).toBeLessThan(SLOW_MS - 500);
    expect(await second).toBeGreaterThanOrEqual(SLOW_MS - 50);
    expect(Buffer.from(await first)).toEqual(png);
  });

  it('a fetch that outlasts the policy timeout fails as that item, and the engine stays usable', async () => {
    const strict = new InferenceEngine({ images: { allowedHosts: ['127.0.0.1'], fetchTimeoutMs: 300 } });
    try {
      await expect(strict.extract({ model: CLASSIFIER, items: [{ image: { base64: png.toString('base64') } }, { image: `${origin}/slow.png` }] })).rejects.toMatchObject({
        code: ErrorCode.INVALID_INPUT,
        message: expect.stringMatching(/^image item 1: cannot fetch image .*slow\.png/),
      });
      expect((await strict.extract({ model: CLASSIFIER, items: [{ image: `${origin}/fast.png` }] })).items).toHaveLength(1);
    } finally {
      await strict.close();
    }
  });

  it('an image error never echoes the bytes a server sent', async () => {
    const secretHex = SECRET.subarray(0, 8).toString('hex');
    let message = '';
    try {
      await engine.extract({ model: CLASSIFIER, items: [{ image: `${origin}/not-an-image` }] });
    } catch (error) {
      message = error instanceof Error ? error.message : String(error);
    }
    expect(message).toMatch(/^image item 0: not a supported image \(29 bytes in no image format sharp reads\)/);
    expect(message).not.toContain(secretHex);
    expect(message).not.toContain('SECRET');
    await expect(decodeRgb(Buffer.from('<!DOCTYPE html><p>secret</p>'), { maxPixels: 1000 })).rejects.toMatchObject({
      message: expect.stringMatching(/^not a supported image \(an HTML, XML or SVG document of 28 bytes\)/),
    });
  });
});
