import { realpath } from 'node:fs/promises';
import { isAbsolute, resolve } from 'node:path';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { DEFAULT_LIMITS } from '../protocol/limits.js';
import type { ImageSource } from '../protocol/requests.js';
import { readFileInRoots } from './checked-file.js';
import { isInsideRoot } from './path-roots.js';

/**
 * Where an image item's bytes come from, and the policy that guards it: local files only inside
 * configured roots (symbolic links resolved first, so a link cannot escape), http(s) URLs only for
 * configured hosts (every redirect re-checked), and a byte cap on every source. The policy is
 * checked on the main thread when the request arrives. Files are read in a prep thread; URLs are
 * fetched by an ImageFetcher on the main thread (network waits cost it nothing), so a slow host
 * delays only the requests that name it, never the prep thread every other request goes through.
 */

export const ImagePolicy = z.strictObject({
  /** Folders local image paths may point into; empty = local paths refused. */
  roots: z.array(z.string()).default([]),
  /** Hosts http(s) image URLs may point to (exact, or `*.example.com`); empty = URLs refused. */
  allowedHosts: z.array(z.string()).default([]),
  /** Bytes of one encoded image. */
  maxBytes: z.number().int().positive().default(DEFAULT_LIMITS.maxImageBytes),
  /** Decoded pixels (width × height) of one image; larger images are refused before decoding. */
  maxPixels: z.number().int().positive().default(40_000_000),
  fetchTimeoutMs: z.number().int().positive().default(15_000),
});
export type ImagePolicy = z.output<typeof ImagePolicy>;
export type ImagePolicyInput = z.input<typeof ImagePolicy>;

/** A checked image reference, plain data so it can travel to a prep thread. */
export type ImageInput =
  | { kind: 'bytes'; bytes: Uint8Array }
  | { kind: 'base64'; data: string }
  | { kind: 'path'; path: string }
  | { kind: 'url'; url: string };

const MAX_REDIRECTS = 3;
const DATA_URL = /^data:image\/[a-z0-9.+-]+;base64,/i;

export function hostAllowed(host: string, allowed: readonly string[]): boolean {
  const name = host.toLowerCase();
  return allowed.some((pattern) => {
    const p = pattern.toLowerCase();
    if (p === '*') return true;
    if (p.startsWith('*.')) return name.endsWith(p.slice(1)) && name.length > p.length - 1;
    return name === p;
  });
}

function checkUrl(raw: string, policy: ImagePolicy): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `"${raw.slice(0, 200)}" is not a valid image URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `image URLs must be http(s), got ${url.protocol}`);
  }
  if (!hostAllowed(url.hostname, policy.allowedHosts)) {
    throw new ShoalError(
      ErrorCode.INVALID_INPUT,
      `fetching images from ${url.hostname} is not allowed; add it to the image policy's allowedHosts (SHOAL_IMAGE_HOSTS) or send the image bytes`,
    );
  }
  return url;
}

function outsideRoots(raw: string, policy: ImagePolicy): ShoalError {
  return new ShoalError(
    ErrorCode.INVALID_INPUT,
    `image file ${raw} is outside the allowed image roots (${policy.roots.join(', ')}); allow its folder with --image-root DIR on the command line (shoal encode/extract/dev) or SHOAL_IMAGE_ROOTS for the worker`,
  );
}

async function checkPath(raw: string, policy: ImagePolicy): Promise<string> {
  if (policy.roots.length === 0) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, 'local image paths are not allowed here; send the image bytes (base64), or allow a folder: --image-root DIR on the command line (shoal encode/extract/dev), SHOAL_IMAGE_ROOTS for the worker');
  }
  const candidate = isAbsolute(raw) ? resolve(raw) : resolve(process.cwd(), raw);
  const outside = (): ShoalError => outsideRoots(raw, policy);
  const realRoots = await Promise.all(policy.roots.map((root) => realpath(resolve(root)).catch(() => resolve(root))));
  // The path as written is checked before the file system is asked about it: otherwise "does not
  // exist" vs "outside the roots" would tell a caller which files exist anywhere on the machine.
  // A root may be named as configured or by its real path (a root that is itself a link).
  const writtenRoots = [...policy.roots.map((root) => resolve(root)), ...realRoots];
  if (!writtenRoots.some((root) => isInsideRoot(root, candidate))) throw outside();
  let real: string;
  try {
    real = await realpath(candidate);
  } catch {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `image file ${raw} does not exist`);
  }
  // Then where it really is: a link inside a root must not lead out of them.
  if (!realRoots.some((root) => isInsideRoot(root, real))) throw outside();
  return real;
}

/** Turns a request's image source into a checked ImageInput (main thread, cheap). */
export async function checkImageSource(source: ImageSource, policy: ImagePolicy): Promise<ImageInput> {
  if (source instanceof Uint8Array) return { kind: 'bytes', bytes: source };
  if (typeof source === 'string') {
    if (DATA_URL.test(source)) return { kind: 'base64', data: source.slice(source.indexOf(',') + 1) };
    if (/^https?:\/\//i.test(source)) return { kind: 'url', url: checkUrl(source, policy).href };
    return { kind: 'path', path: await checkPath(source, policy) };
  }
  if ('base64' in source) return { kind: 'base64', data: source.base64 };
  if ('url' in source) return { kind: 'url', url: checkUrl(source.url, policy).href };
  return { kind: 'path', path: await checkPath(source.path, policy) };
}

function tooLarge(bytes: number, policy: ImagePolicy): ShoalError {
  return new ShoalError(ErrorCode.INPUT_TOO_LARGE, `image of ${bytes} bytes exceeds the limit of ${policy.maxBytes} bytes`, {
    details: { bytes, limit: policy.maxBytes },
  });
}

async function readCapped(response: Response, policy: ImagePolicy, url: string): Promise<Uint8Array> {
  const declared = Number(response.headers.get('content-length') ?? '0');
  if (declared > policy.maxBytes) throw tooLarge(declared, policy);
  if (response.body === null) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of response.body) {
    total += chunk.length;
    if (total > policy.maxBytes) throw tooLarge(total, policy);
    chunks.push(chunk);
  }
  if (total === 0) throw new ShoalError(ErrorCode.INVALID_INPUT, `image at ${url} is empty`);
  return Buffer.concat(chunks);
}

async function fetchImage(start: string, policy: ImagePolicy, signal?: AbortSignal): Promise<Uint8Array> {
  let url = start;
  const deadline = AbortSignal.timeout(policy.fetchTimeoutMs);
  const abort = signal === undefined ? deadline : AbortSignal.any([deadline, signal]);
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    let response: Response;
    try {
      response = await fetch(url, { redirect: 'manual', signal: abort });
    } catch (error) {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `cannot fetch image ${url}: ${String(error)}`, { cause: error });
    }
    if (response.status >= 300 && response.status < 400) {
      const location = response.headers.get('location');
      if (location === null) throw new ShoalError(ErrorCode.INVALID_INPUT, `image ${url} redirects without a location`);
      // The redirect target must itself be an allowed host.
      url = checkUrl(new URL(location, url).href, policy).href;
      continue;
    }
    if (!response.ok) throw new ShoalError(ErrorCode.INVALID_INPUT, `image ${url} answered HTTP ${response.status}`);
    return readCapped(response, policy, url);
  }
  throw new ShoalError(ErrorCode.INVALID_INPUT, `image ${start} redirects more than ${MAX_REDIRECTS} times`);
}

/** The encoded bytes of an image (prep thread). */
export async function readImageInput(input: ImageInput, policy: ImagePolicy): Promise<Uint8Array> {
  switch (input.kind) {
    case 'bytes':
      if (input.bytes.length > policy.maxBytes) throw tooLarge(input.bytes.length, policy);
      if (input.bytes.length === 0) throw new ShoalError(ErrorCode.INVALID_INPUT, 'image is empty (0 bytes)');
      return input.bytes;
    case 'base64': {
      const estimated = Math.floor((input.data.length * 3) / 4);
      if (estimated > policy.maxBytes) throw tooLarge(estimated, policy);
      const bytes = Buffer.from(input.data, 'base64');
      if (bytes.length === 0) throw new ShoalError(ErrorCode.INVALID_INPUT, 'image is empty (no base64 data)');
      return bytes;
    }
    case 'path': {
      // Opened once and checked on that descriptor (checked-file.ts): a link swapped in after
      // checkPath cannot lead the read out of the roots, and the size is known before any byte.
      const bytes = await readFileInRoots(input.path, { roots: policy.roots, maxBytes: policy.maxBytes, tooLarge: (size) => tooLarge(size, policy), outside: () => outsideRoots(input.path, policy) });
      if (bytes.length === 0) throw new ShoalError(ErrorCode.INVALID_INPUT, `image file ${input.path} is empty (0 bytes)`);
      return bytes;
    }
    case 'url':
      return fetchImage(input.url, policy);
  }
}

/** Fetches at once per host: a slow host cannot take every socket, the queue of its own requests waits instead. @default 4 */
export const DEFAULT_FETCHES_PER_HOST = 4;

/**
 * Fetches URL images with at most `perHost` requests in flight to one host (the rest of that
 * host's requests queue; other hosts are not affected), each within the policy's timeout.
 */
export class ImageFetcher {
  readonly #perHost: number;
  readonly #active = new Map<string, number>();
  readonly #queued = new Map<string, (() => void)[]>();

  constructor(perHost: number = DEFAULT_FETCHES_PER_HOST) {
    this.#perHost = Math.max(1, perHost);
  }

  async fetch(url: string, policy: ImagePolicy, signal?: AbortSignal): Promise<Uint8Array> {
    const host = new URL(url).host;
    await this.#acquire(host);
    try {
      return await fetchImage(url, policy, signal);
    } finally {
      this.#release(host);
    }
  }

  async #acquire(host: string): Promise<void> {
    const active = this.#active.get(host) ?? 0;
    if (active < this.#perHost) {
      this.#active.set(host, active + 1);
      return;
    }
    await new Promise<void>((resolve) => {
      const queue = this.#queued.get(host) ?? [];
      queue.push(resolve);
      this.#queued.set(host, queue);
    });
  }

  /** Hands the slot to the next queued fetch of the host, or frees it. */
  #release(host: string): void {
    const next = this.#queued.get(host)?.shift();
    if (next !== undefined) {
      next();
      return;
    }
    this.#queued.delete(host);
    const active = (this.#active.get(host) ?? 1) - 1;
    if (active <= 0) this.#active.delete(host);
    else this.#active.set(host, active);
  }
}
