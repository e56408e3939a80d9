import { mkdir, readFile, realpath, rename, writeFile } from 'node:fs/promises';
import { dirname, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Objm, type ObjectStore } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { toNatsShoalError } from './nats-errors.js';

/**
 * Data that travels by reference instead of inside a message: job parts and results over the
 * server's max_payload, and results written to a store target. References are URIs:
 * - `obj://<bucket>/<name>`: the NATS object store (any bucket the account can read);
 * - `file:///path`: a shared filesystem, only inside the configured roots (a job from a remote
 *   caller must not read or write arbitrary files on a worker);
 * - `s3://bucket/key`: reserved; not implemented yet (UNSUPPORTED_OPERATION names it).
 */

export interface PayloadStoreOptions {
  /** Object store bucket for this deployment's payloads (natsNames().payloadBucket). */
  bucket: string;
  /** Folders `file://` references may point into; empty = file references refused. @default [] */
  fileRoots?: readonly string[];
}

type ParsedRef = { kind: 'obj'; bucket: string; name: string } | { kind: 'file'; path: string } | { kind: 's3' };

function parseRef(ref: string): ParsedRef {
  const obj = /^obj:\/\/([^/]+)\/(.+)$/.exec(ref);
  if (obj !== null) return { kind: 'obj', bucket: obj[1] ?? '', name: obj[2] ?? '' };
  if (ref.startsWith('file://')) {
    try {
      return { kind: 'file', path: fileURLToPath(ref) };
    } catch (error) {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `"${ref.slice(0, 200)}" is not a valid file:// URI (use file:///absolute/path)`, { cause: error });
    }
  }
  if (ref.startsWith('s3://')) return { kind: 's3' };
  throw new ShoalError(ErrorCode.INVALID_INPUT, `"${ref.slice(0, 200)}" is not a payload reference (obj://bucket/name or file:///path)`);
}

function inside(root: string, path: string): boolean {
  const base = root.endsWith(sep) ? root : root + sep;
  return path === root || path.startsWith(base);
}

export class PayloadStore {
  readonly bucket: string;
  readonly #objm: Objm;
  readonly #roots: readonly string[];
  readonly #stores = new Map<string, Promise<ObjectStore>>();

  constructor(nc: NatsConnection, options: PayloadStoreOptions) {
    this.bucket = options.bucket;
    this.#objm = new Objm(nc);
    this.#roots = (options.fileRoots ?? []).map((root) => resolve(root));
  }

  #store(bucket: string): Promise<ObjectStore> {
    let store = this.#stores.get(bucket);
    if (store === undefined) {
      store = this.#objm.open(bucket).catch((error: unknown) => {
        this.#stores.delete(bucket);
        throw toNatsShoalError(error, `open object store ${bucket}`);
      });
      this.#stores.set(bucket, store);
    }
    return store;
  }

  /** Checks a file path against the roots, on the path as written and once links are resolved. */
  async #checkFile(path: string, forWrite: boolean): Promise<string> {
    const absolute = resolve(path);
    const refused = (): ShoalError =>
      new ShoalError(
        ErrorCode.INVALID_INPUT,
        this.#roots.length === 0
          ? `file references are turned off on this worker (${absolute}); configure file roots (SHOAL_FILE_ROOTS) or use obj://`
          : `${absolute} is outside the allowed file roots (${this.#roots.join(', ')})`,
      );
    if (!this.#roots.some((root) => inside(root, absolute))) throw refused();
    // For a write the file may not exist yet: its folder is what must resolve inside a root.
    const existing = forWrite ? dirname(absolute) : absolute;
    const real = await realpath(existing).catch(() => null);
    if (real !== null) {
      const realRoots = await Promise.all(this.#roots.map(async (root) => realpath(root).catch(() => root)));
      if (!realRoots.some((root) => inside(root, real))) throw refused();
    }
    return absolute;
  }

  /** Stores data in this deployment's bucket under `name`; returns its `obj://` reference. */
  async put(name: string, data: Uint8Array): Promise<string> {
    const store = await this.#store(this.bucket);
    try {
      await store.putBlob({ name }, data);
    } catch (error) {
      throw toNatsShoalError(error, `store ${name} in object store ${this.bucket}`);
    }
    return `obj://${this.bucket}/${name}`;
  }

  /** Writes data at `<base>/<relative>` of a store URI (a result target); returns the full reference. */
  async write(base: string, relative: string, data: Uint8Array): Promise<string> {
    const obj = /^obj:\/\/([^/]+)\/?(.*)$/.exec(base);
    if (obj !== null) {
      const bucket = obj[1] ?? '';
      const prefix = (obj[2] ?? '').replace(/\/+$/, '');
      const name = prefix === '' ? relative : `${prefix}/${relative}`;
      const store = await this.#store(bucket);
      try {
        await store.putBlob({ name }, data);
      } catch (error) {
        throw toNatsShoalError(error, `write ${name} to object store ${bucket}`);
      }
      return `obj://${bucket}/${name}`;
    }
    const parsed = parseRef(base);
    if (parsed.kind !== 'file') throw s3Unsupported();
    const path = await this.#checkFile(resolve(parsed.path, relative), true);
    try {
      await mkdir(dirname(path), { recursive: true });
      // Written beside and renamed, so a reader never sees half a file (a redelivered part rewrites it whole).
      const temporary = `${path}.${process.pid}.tmp`;
      await writeFile(temporary, data);
      await rename(temporary, path);
    } catch (error) {
      throw new ShoalError(ErrorCode.UNAVAILABLE, `cannot write ${path}: ${String(error)}`, { cause: error });
    }
    return pathToFileURL(path).href;
  }

  /** Reads the data a reference points at; a missing object is INVALID_INPUT (retrying will not help). */
  async get(ref: string): Promise<Uint8Array> {
    const parsed = parseRef(ref);
    if (parsed.kind === 's3') throw s3Unsupported();
    if (parsed.kind === 'file') {
      const path = await this.#checkFile(parsed.path, false);
      try {
        return await readFile(path);
      } catch (error) {
        const missing = error instanceof Error && 'code' in error && error.code === 'ENOENT';
        throw new ShoalError(missing ? ErrorCode.INVALID_INPUT : ErrorCode.UNAVAILABLE, `cannot read ${path}: ${String(error)}`, { cause: error });
      }
    }
    const store = await this.#store(parsed.bucket);
    let data: Uint8Array | null;
    try {
      data = await store.getBlob(parsed.name);
    } catch (error) {
      throw toNatsShoalError(error, `read ${ref}`);
    }
    if (data === null) throw new ShoalError(ErrorCode.INVALID_INPUT, `${ref} does not exist (expired or never stored)`);
    return data;
  }

  /** Removes an object of this deployment's bucket; missing objects are fine. */
  async remove(ref: string): Promise<void> {
    const parsed = parseRef(ref);
    if (parsed.kind !== 'obj') return;
    const store = await this.#store(parsed.bucket);
    await store.delete(parsed.name).catch(() => undefined);
  }
}

function s3Unsupported(): ShoalError {
  return new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 's3:// references are not supported yet; use obj:// (NATS object store) or file://');
}

/** Reads a reference and parses it as JSON. */
export async function getJson(store: PayloadStore, ref: string): Promise<unknown> {
  const data = await store.get(ref);
  try {
    return JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8'));
  } catch (error) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `${ref} does not hold JSON: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}
