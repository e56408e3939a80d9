import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { checkImageSource, hostAllowed, ImagePolicy, readImageInput, type ImagePolicyInput } from '../../../../adapters/sources/image-input.js';

/**
 * The image policy: local files only inside the configured roots (symbolic links resolved, so a
 * link cannot escape), http(s) URLs only for allowed hosts (redirects re-checked), byte caps on
 * every source, and clear errors for empty or unreadable data. A private HTTP server on
 * 127.0.0.1 plays the remote side.
 */

const MAX = 1000;
const IMAGE = Buffer.from('\x89PNG\r\n\x1a\n pretend image bytes');

let base: string;
let root: string;
let outside: string;
let server: Server;
let origin: string;
let port: number;

function policy(input: ImagePolicyInput = {}): ImagePolicy {
  return ImagePolicy.parse({ roots: [root], allowedHosts: ['127.0.0.1'], maxBytes: MAX, ...input });
}

beforeAll(async () => {
  base = realpathSync(mkdtempSync(join(tmpdir(), 'shoal-image-input-')));
  root = join(base, 'root');
  outside = join(base, 'outside');
  mkdirSync(join(root, 'sub'), { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(root, 'sub', 'in.png'), IMAGE);
  writeFileSync(join(root, 'empty.png'), '');
  writeFileSync(join(root, 'big.png'), Buffer.alloc(MAX + 1, 1));
  writeFileSync(join(outside, 'secret.png'), IMAGE);
  symlinkSync(join(outside, 'secret.png'), join(root, 'escape.png'));
  symlinkSync(outside, join(root, 'escape-dir'));
  symlinkSync(join(root, 'sub', 'in.png'), join(root, 'alias.png'));

  server = createServer((request, response) => {
    const path = request.url ?? '/';
    if (path === '/ok.png') {
      response.writeHead(200, { 'content-type': 'image/png', 'content-length': IMAGE.length });
      response.end(IMAGE);
    } else if (path === '/declared-big') {
      response.writeHead(200, { 'content-length': MAX + 1 });
      response.end(Buffer.alloc(MAX + 1));
    } else if (path === '/streamed-big') {
      // No content-length: the cap must hold while reading.
      response.writeHead(200, { 'content-type': 'image/png' });
      for (let i = 0; i < 5; i++) response.write(Buffer.alloc(400, 7));
      response.end();
    } else if (path === '/empty') {
      response.writeHead(200, { 'content-length': 0 });
      response.end();
    } else if (path === '/redirect-same') {
      response.writeHead(302, { location: '/ok.png' });
      response.end();
    } else if (path === '/redirect-away') {
      response.writeHead(302, { location: `http://localhost:${port}/ok.png` });
      response.end();
    } else if (path === '/loop') {
      response.writeHead(302, { location: '/loop' });
      response.end();
    } else {
      response.writeHead(404);
      response.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address: AddressInfo | string | null = server.address();
  if (address === null || typeof address === 'string') throw new Error('no server port');
  port = address.port;
  origin = `http://127.0.0.1:${port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  rmSync(base, { recursive: true, force: true });
});

describe('local paths', () => {
  it('a file inside a root is accepted (absolute, relative to the working folder, or {path})', async () => {
    const file = join(root, 'sub', 'in.png');
    expect(await checkImageSource(file, policy())).toEqual({ kind: 'path', path: file });
    expect(await checkImageSource(relative(process.cwd(), file), policy())).toEqual({ kind: 'path', path: file });
    const input = await checkImageSource({ path: file }, policy());
    expect(Buffer.from(await readImageInput(input, policy()))).toEqual(IMAGE);
  });

  it('paths outside the roots are refused, ../ included', async () => {
    for (const path of [join(outside, 'secret.png'), join(root, '..', 'outside', 'secret.png'), join(root, 'sub', '..', '..', 'outside', 'secret.png')]) {
      await expect(checkImageSource(path, policy())).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('is outside the allowed image roots') });
    }
  });

  it('symbolic links are resolved first: a link escaping the root is refused, one staying inside is accepted', async () => {
    await expect(checkImageSource(join(root, 'escape.png'), policy())).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('outside the allowed image roots') });
    await expect(checkImageSource(join(root, 'escape-dir', 'secret.png'), policy())).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT });
    expect(await checkImageSource(join(root, 'alias.png'), policy())).toEqual({ kind: 'path', path: join(root, 'sub', 'in.png') });
  });

  it('a policy without roots refuses every path; a missing file is named', async () => {
    await expect(checkImageSource(join(root, 'sub', 'in.png'), policy({ roots: [] }))).rejects.toMatchObject({
      code: ErrorCode.INVALID_INPUT,
      message: expect.stringContaining('local image paths are not allowed here'),
    });
    await expect(checkImageSource(join(root, 'nope.png'), policy())).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringMatching(/nope\.png does not exist/) });
  });

  it('says nothing of files outside the roots: a missing and an existing one get the same refusal', async () => {
    const refusals = await Promise.all(
      [join(outside, 'secret.png'), join(outside, 'no-such-file.png'), '/etc/passwd', '/no/such/dir/x.png'].map((path) =>
        checkImageSource(path, policy()).then(
          () => 'accepted',
          (error: unknown) => (error instanceof Error ? error.message.replace(/^image file \S+/, 'image file P') : String(error)),
        ),
      ),
    );
    expect(new Set(refusals).size).toBe(1);
    expect(refusals[0]).toContain('is outside the allowed image roots');
  });

  it('a root that is itself a link may be named by its real path', async () => {
    const linkedRoot = join(base, 'linked-root');
    symlinkSync(join(root, 'sub'), linkedRoot);
    expect(await checkImageSource(join(root, 'sub', 'in.png'), policy({ roots: [linkedRoot] }))).toEqual({ kind: 'path', path: join(root, 'sub', 'in.png') });
    expect(await checkImageSource(join(linkedRoot, 'in.png'), policy({ roots: [linkedRoot] }))).toEqual({ kind: 'path', path: join(root, 'sub', 'in.png') });
  });

  it('byte limit and empty files', async () => {
    const big = await checkImageSource(join(root, 'big.png'), policy());
    await expect(readImageInput(big, policy())).rejects.toMatchObject({ code: ErrorCode.INPUT_TOO_LARGE, details: { bytes: MAX + 1, limit: MAX } });
    const empty = await checkImageSource(join(root, 'empty.png'), policy());
    await expect(readImageInput(empty, policy())).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('is empty (0 bytes)') });
  });
});

describe('URLs', () => {
  it('an allowed host is fetched, also through a redirect on the same host', async () => {
    for (const url of [`${origin}/ok.png`, `${origin}/redirect-same`]) {
      const input = await checkImageSource(url, policy());
      expect(input).toEqual({ kind: 'url', url });
      expect(Buffer.from(await readImageInput(input, policy()))).toEqual(IMAGE);
    }
    const object = await checkImageSource({ url: `${origin}/ok.png` }, policy());
    expect(Buffer.from(await readImageInput(object, policy()))).toEqual(IMAGE);
  });

  it('a host that is not allowed is refused before any request', async () => {
    await expect(checkImageSource(`${origin}/ok.png`, policy({ allowedHosts: ['images.example.com'] }))).rejects.toMatchObject({
      code: ErrorCode.INVALID_INPUT,
      message: expect.stringContaining('fetching images from 127.0.0.1 is not allowed'),
    });
    await expect(checkImageSource({ url: `${origin}/ok.png` }, policy({ allowedHosts: [] }))).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT });
  });

  it('a redirect to a host that is not allowed is refused', async () => {
    const input = await checkImageSource(`${origin}/redirect-away`, policy());
    await expect(readImageInput(input, policy())).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('fetching images from localhost is not allowed') });
  });

  it('redirect loops, HTTP errors and other schemes fail clearly', async () => {
    await expect(readImageInput(await checkImageSource(`${origin}/loop`, policy()), policy())).rejects.toMatchObject({ message: expect.stringContaining('redirects more than 3 times') });
    await expect(readImageInput(await checkImageSource(`${origin}/missing.png`, policy()), policy())).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('answered HTTP 404') });
    await expect(checkImageSource({ url: 'ftp://127.0.0.1/x.png' }, policy())).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('must be http(s)') });
    await expect(checkImageSource({ url: 'not a url' }, policy())).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('is not a valid image URL') });
  });

  it('byte limit from content-length and while streaming; empty bodies', async () => {
    for (const path of ['/declared-big', '/streamed-big']) {
      await expect(readImageInput(await checkImageSource(`${origin}${path}`, policy()), policy())).rejects.toMatchObject({ code: ErrorCode.INPUT_TOO_LARGE });
    }
    await expect(readImageInput(await checkImageSource(`${origin}/empty`, policy()), policy())).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('is empty') });
  });

  it('host patterns: exact, *.domain (not the domain itself), and *', () => {
    expect(hostAllowed('IMG.Example.com', ['img.example.com'])).toBe(true);
    expect(hostAllowed('cdn.example.com', ['*.example.com'])).toBe(true);
    expect(hostAllowed('example.com', ['*.example.com'])).toBe(false);
    expect(hostAllowed('badexample.com', ['*.example.com'])).toBe(false);
    expect(hostAllowed('anything.org', ['*'])).toBe(true);
    expect(hostAllowed('anything.org', [])).toBe(false);
  });
});

describe('inline data', () => {
  it('data: URLs and {base64} decode to the bytes', async () => {
    const data = IMAGE.toString('base64');
    for (const source of [`data:image/png;base64,${data}`, { base64: data }]) {
      const input = await checkImageSource(source, policy());
      expect(input).toEqual({ kind: 'base64', data });
      expect(Buffer.from(await readImageInput(input, policy()))).toEqual(IMAGE);
    }
  });

  it('raw bytes pass through; byte limits hold for bytes and base64', async () => {
    const input = await checkImageSource(new Uint8Array(IMAGE), policy());
    expect(Buffer.from(await readImageInput(input, policy()))).toEqual(IMAGE);
    await expect(readImageInput({ kind: 'bytes', bytes: new Uint8Array(MAX + 1) }, policy())).rejects.toMatchObject({ code: ErrorCode.INPUT_TOO_LARGE });
    const large = Buffer.alloc(MAX + 10, 3).toString('base64');
    await expect(readImageInput(await checkImageSource({ base64: large }, policy()), policy())).rejects.toMatchObject({ code: ErrorCode.INPUT_TOO_LARGE });
  });

  it('empty data is refused', async () => {
    await expect(readImageInput({ kind: 'bytes', bytes: new Uint8Array() }, policy())).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: 'image is empty (0 bytes)' });
    await expect(readImageInput(await checkImageSource({ base64: '====' }, policy()), policy())).rejects.toMatchObject({
      code: ErrorCode.INVALID_INPUT,
      message: 'image is empty (no base64 data)',
    });
  });
});
