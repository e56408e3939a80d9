import { readFile, realpath } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Objm, type ObjectStore } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { S3Store, formatS3Uri, joinKey, parseS3Uri, type S3Location, type S3SettingsInput } from '../object-store/index.js';
import { ErrorCode, ShoalError, hasErrorCode } from '../protocol/errors.js';
import { toNatsShoalError } from './nats-errors.js';
import { isInsideRoot } from '../sources/path-roots.js';
import { writeFileAtomically } from '../runtime/atomic-write.js';

/**
 * Data that travels by reference instead of inside a message: job parts and results over the
 * server's max_payload, and results written to a store target. References are URIs:
 * - `obj://<bucket>/<name>`: the NATS object store (any bucket the account can read);
 * - `file:///path`: a shared filesystem, only inside the configured roots (a job from a remote
 *   caller must not read or write arbitrary files on a worker);
 * - `s3://bucket/key`: S3 or an S3-compatible server (adapters/object-store), only in the allowed
 *   buckets when the settings name some; writes are atomic (a put, or a multipart upload that
 *   appears only when complete), reads and writes retried with backoff through short outages.
 */

/** Largest object an `s3://` payload or result reference may point at (a part is at most 100,000 items). */
export const MAX_S3_PAYLOAD_BYTES = 512 * 1024 * 1024;

export interface PayloadStoreOptions {
  /** Object store bucket for this deployment's payloads (natsNames().payloadBucket). */
  bucket: string;
  /** Folders `file://` references may point into; empty = file references refused. @default [] */
  fileRoots?: readonly string[];
  /** S3 settings for `s3://` references (client built at first use). @default the SDK's defaults, any bucket */
  s3?: S3SettingsInput;
  /** An S3 store to use instead (shared with other parts of the process; not closed by close()). */
  s3Store?: S3Store;
}

type ParsedRef = { kind: 'obj'; bucket: string; name: string } | { kind: 'file'; path: string } | { kind: 's3'; location: S3Location };

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
  if (ref.startsWith('s3://')) return { kind: 's3', location: parseS3Uri(ref) };
  throw new ShoalError(ErrorCode.INVALID_INPUT, `"${ref.slice(0, 200)}" is not a payload reference (obj://bucket/name, s3://bucket/key or file:///path)`);
}

export class PayloadStore {
  readonly bucket: string;
  readonly #objm: Objm;
  readonly #roots: readonly string[];
  readonly #stores = new Map<string, Promise<ObjectStore>>();
  readonly #s3Settings: S3SettingsInput;
  #s3: S3Store | null;
  readonly #ownsS3: boolean;

  constructor(nc: NatsConnection, options: PayloadStoreOptions) {
    this.bucket = options.bucket;
    this.#objm = new Objm(nc);
    this.#roots = (options.fileRoots ?? []).map((root) => resolve(root));
    this.#s3Settings = options.s3 ?? {};
    this.#s3 = options.s3Store ?? null;
    this.#ownsS3 = options.s3Store === undefined;
  }

  /** The S3 store, built at the first `s3://` reference (a worker without S3 traffic never builds a client). */
  #s3Store(): S3Store {
    this.#s3 ??= new S3Store(this.#s3Settings);
    return this.#s3;
  }

  /** Checks a result target before a job is accepted: a bad or disallowed `s3://` URI is refused at submit, not on the worker. */
  checkTarget(uri: string): void {
    if (uri.startsWith('s3://')) this.#s3Store().locate(uri);
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
    if (!this.#roots.some((root) => isInsideRoot(root, absolute))) throw refused();
    // For a write the file may not exist yet: its folder is what must resolve inside a root.
    const existing = forWrite ? dirname(absolute) : absolute;
    const real = await realpath(existing).catch(() => null);
    if (real !== null) {
      const realRoots = await Promise.all(this.#roots.map(async (root) => realpath(root).catch(() => root)));
      if (!realRoots.some((root) => isInsideRoot(root, real))) throw refused();
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
    if (parsed.kind === 's3') {
      const s3 = this.#s3Store();
      const target = s3.locate(base);
      const location = { bucket: target.bucket, key: joinKey(target.key, relative) };
      // One object written whole (a put, or a multipart upload visible only once complete): a
      // redelivered part rewrites the same key, so the result lands exactly once.
      await s3.write(location, data, { contentType: relative.endsWith('.jsonl') ? 'application/x-ndjson' : 'application/json' });
      return formatS3Uri(location);
    }
    if (parsed.kind !== 'file') throw new ShoalError(ErrorCode.INVALID_INPUT, `"${base.slice(0, 200)}" is not a result target (obj://, s3:// or file://)`);
    const path = await this.#checkFile(resolve(parsed.path, relative), true);
    try {
      // Written beside and renamed, so a reader never sees half a file (a redelivered part rewrites it whole).
      await writeFileAtomically(path, data);
    } catch (error) {
      throw new ShoalError(ErrorCode.UNAVAILABLE, `cannot write ${path}: ${String(error)}`, { cause: error });
    }
    return pathToFileURL(path).href;
  }

  /** Reads the data a reference points at; a missing object is INVALID_INPUT (retrying will not help). */
  async get(ref: string): Promise<Uint8Array> {
    const parsed = parseRef(ref);
    if (parsed.kind === 's3') {
      const s3 = this.#s3Store();
      try {
        return await s3.read(s3.locate(ref), MAX_S3_PAYLOAD_BYTES);
      } catch (error) {
        if (hasErrorCode(error, ErrorCode.NOT_FOUND)) throw new ShoalError(ErrorCode.INVALID_INPUT, `${ref} does not exist`, { cause: error });
        throw error;
      }
    }
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

  /** Releases the S3 client's connections (when this store built it). */
  close(): void {
    if (this.#ownsS3) this.#s3?.close();
    this.#s3 = null;
  }
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
