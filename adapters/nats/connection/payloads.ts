import { realpath } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { Objm, type ObjectStore } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { S3Store, formatS3Uri, joinKey, parseS3Uri, type S3Location, type S3SettingsInput } from '../../object-store/index.js';
import { ErrorCode, ShoalError, hasErrorCode, isShoalError } from '../../protocol/errors.js';
import { JS_CODES, isJsApiCode, toNatsShoalError } from './nats-errors.js';
import { isDeploymentBucket } from '../../protocol/subjects.js';
import { readFileInRoots, streamFileInRoots } from '../../sources/checked-file.js';
import { isInsideRoot } from '../../sources/path-roots.js';
import { writeFileAtomically } from '../../support/atomic-write.js';

/**
 * Data that travels by reference instead of inside a message: job parts and results over the
 * server's max_payload, and results written to a store target. References are URIs:
 * - `obj://<bucket>/<name>`: the NATS object store, only this deployment's buckets (its payload
 *   bucket and `<p>-<name>` ones, isDeploymentBucket: another deployment's on a shared server is
 *   refused, INVALID_INPUT, before the server is asked); buckets are never created here: a bucket
 *   that does not exist is INVALID_INPUT, refused at submit for a result target and terminated,
 *   not retried, by a worker;
 * - `file:///path`: a shared filesystem, only inside the configured roots (a job from a remote
 *   caller must not read or write arbitrary files on a worker), read from the file opened and
 *   checked (adapters/sources/checked-file.ts), never by name after a check;
 * - `s3://bucket/key`: S3 or an S3-compatible server (adapters/object-store), only in the allowed
 *   buckets when the settings name some; writes are atomic (a put, or a multipart upload that
 *   appears only when complete), reads and writes retried with backoff through short outages.
 */

/** Largest object an `s3://` or `file://` payload or result reference may point at (a part is at most 100,000 items). */
export const MAX_S3_PAYLOAD_BYTES = 512 * 1024 * 1024;

/** How much of a reference get() reads: payloads by default; an ingest run's documents at the document limit. */
export interface ReadLimit {
  maxBytes: number;
  /** The refusal of a larger object or file. */
  tooLarge: (size: number, ref: string) => ShoalError;
}

const PAYLOAD_LIMIT: ReadLimit = Object.freeze({
  maxBytes: MAX_S3_PAYLOAD_BYTES,
  tooLarge: (size: number, ref: string) =>
    new ShoalError(ErrorCode.INPUT_TOO_LARGE, `${ref} has ${size} bytes, over the limit of ${MAX_S3_PAYLOAD_BYTES} bytes`, { details: { size, limit: MAX_S3_PAYLOAD_BYTES } }),
});

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

/** NATS object store bucket names (the client's own rule): letters, digits, `-` and `_`. */
const BUCKET_NAME = /^[-\w]+$/;

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

/**
 * Where `path` really is: its real path when it exists, else the real path of its nearest
 * existing ancestor with the missing rest appended (what mkdir -p would create); null when not
 * even the file system's root resolves.
 */
async function realOrNearest(path: string): Promise<string | null> {
  const missing: string[] = [];
  let current = path;
  for (;;) {
    const real = await realpath(current).catch(() => null);
    if (real !== null) return missing.length === 0 ? real : join(real, ...missing.reverse());
    const parent = dirname(current);
    if (parent === current) return null;
    missing.push(basename(current));
    current = parent;
  }
}

export class PayloadStore {
  readonly bucket: string;
  readonly #nc: NatsConnection;
  readonly #objm: Objm;
  #jsm: Promise<JetStreamManager> | null = null;
  readonly #roots: readonly string[];
  readonly #stores = new Map<string, Promise<ObjectStore>>();
  readonly #s3Settings: S3SettingsInput;
  #s3: S3Store | null;
  readonly #ownsS3: boolean;

  constructor(nc: NatsConnection, options: PayloadStoreOptions) {
    this.bucket = options.bucket;
    this.#nc = nc;
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

  /**
   * Checks a result target before a job is accepted, so that a target the workers could not write
   * is refused at submit, not part by part: a bad or disallowed `s3://` URI, an `obj://` URI
   * without a bucket or naming a bucket that does not exist (INVALID_INPUT, `details.field`
   * `result.uri`). Workers call it too, before running a part, so a doomed part costs no inference.
   */
  async checkTarget(uri: string): Promise<void> {
    if (uri.startsWith('s3://')) this.#s3Store().locate(uri);
    if (!uri.startsWith('obj://')) return;
    const obj = /^obj:\/\/([^/]+)(?:\/|$)/.exec(uri);
    if (obj === null) throw new ShoalError(ErrorCode.INVALID_INPUT, `"${uri.slice(0, 200)}" names no object store bucket (obj://bucket/prefix)`, { details: { field: 'result.uri' } });
    try {
      await this.#store(obj[1] ?? '');
    } catch (error) {
      if (isShoalError(error) && error.code === ErrorCode.INVALID_INPUT) throw new ShoalError(ErrorCode.INVALID_INPUT, `result target: ${error.message}`, { cause: error, details: { field: 'result.uri' } });
      throw error;
    }
  }

  /** Refuses another deployment's bucket before the server is asked whether it exists. */
  #checkBucket(bucket: string): void {
    if (isDeploymentBucket(this.bucket, bucket)) return;
    const own = this.bucket.replace(/_payloads$/, '');
    throw new ShoalError(
      ErrorCode.INVALID_INPUT,
      `object store bucket "${bucket.slice(0, 200)}" is not this deployment's: obj:// references and result targets name ${this.bucket} or a bucket named ${own}-<name> (the deployment's subject prefix)`,
      { details: { bucket: bucket.slice(0, 200), allowed: [this.bucket, `${own}-*`] } },
    );
  }

  #store(bucket: string): Promise<ObjectStore> {
    this.#checkBucket(bucket);
    let store = this.#stores.get(bucket);
    if (store === undefined) {
      store = this.#open(bucket);
      store.catch(() => this.#stores.delete(bucket));
      this.#stores.set(bucket, store);
    }
    return store;
  }

  /**
   * Opens a bucket that must exist. A missing bucket named by a caller (a result target, a
   * payload reference) is INVALID_INPUT: retrying cannot create it. This deployment's own bucket
   * missing (a server that lost its store) stays retryable: start-up recreates the topology.
   */
  async #open(bucket: string): Promise<ObjectStore> {
    if (!BUCKET_NAME.test(bucket)) {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `"${bucket.slice(0, 200)}" is not an object store bucket name (letters, digits, - and _)`);
    }
    try {
      this.#jsm ??= jetstreamManager(this.#nc, { checkAPI: false });
      await (await this.#jsm).streams.info(`OBJ_${bucket}`);
    } catch (error) {
      if (!isJsApiCode(error, JS_CODES.StreamNotFound)) {
        this.#jsm = null;
        throw toNatsShoalError(error, `open object store ${bucket}`);
      }
      if (bucket === this.bucket) throw new ShoalError(ErrorCode.UNAVAILABLE, `this deployment's object store ${bucket} does not exist (a restarted worker or gateway creates it)`, { cause: error });
      throw new ShoalError(ErrorCode.INVALID_INPUT, `object store bucket "${bucket}" does not exist: create it first (e.g. nats object add ${bucket}) or use another`, { cause: error });
    }
    try {
      return await this.#objm.open(bucket, false);
    } catch (error) {
      throw toNatsShoalError(error, `open object store ${bucket}`);
    }
  }

  #outsideRoots(absolute: string): ShoalError {
    return new ShoalError(
      ErrorCode.INVALID_INPUT,
      this.#roots.length === 0
        ? `file references are turned off on this worker (${absolute}); configure file roots (SHOAL_FILE_ROOTS) or use obj://`
        : `${absolute} is outside the allowed file roots (${this.#roots.join(', ')})`,
    );
  }

  /** Checks a file path against the roots as written (no file system access). */
  #checkFileName(path: string): string {
    const absolute = resolve(path);
    if (!this.#roots.some((root) => isInsideRoot(root, absolute))) throw this.#outsideRoots(absolute);
    return absolute;
  }

  /** Checks a result file's path against the roots, as written and once links are resolved. */
  async #checkWritePath(path: string): Promise<string> {
    const absolute = this.#checkFileName(path);
    const refused = (): ShoalError => this.#outsideRoots(absolute);
    // The file may not exist yet: its folder is what must resolve inside a root, and
    // when that folder does not exist yet either (a job's own folder), the nearest one that does:
    // the missing ones are created under it, so a link above them decides where the file lands.
    const real = await realOrNearest(dirname(absolute));
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

  /**
   * Stores a stream in this deployment's bucket under `name` (an upload, read from its temp file
   * chunk by chunk, never whole in memory); returns its `obj://` reference.
   */
  async putStream(name: string, data: ReadableStream<Uint8Array>): Promise<string> {
    const store = await this.#store(this.bucket);
    try {
      await store.put({ name }, data);
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
    const path = await this.#checkWritePath(resolve(parsed.path, relative));
    try {
      // Written beside and renamed, so a reader never sees half a file (a redelivered part rewrites it whole).
      await writeFileAtomically(path, data);
    } catch (error) {
      throw new ShoalError(ErrorCode.UNAVAILABLE, `cannot write ${path}: ${String(error)}`, { cause: error });
    }
    return pathToFileURL(path).href;
  }

  /**
   * Checks, before any work, that this process may write the one object `uri` names (a
   * classification run's results): an `obj://` bucket that exists, an allowed `s3://` bucket, a
   * `file://` path inside the roots (links resolved). Refusals are INVALID_INPUT.
   */
  async checkWriteTarget(uri: string): Promise<void> {
    const parsed = parseRef(uri);
    if (parsed.kind === 'file') await this.#checkWritePath(parsed.path);
    else await this.checkTarget(uri);
  }

  /**
   * Writes a stream of bytes as the one object `uri` names (an `obj://bucket/name`, `s3://bucket/key`
   * or `file:///path` inside the roots), never holding it whole, so that a reader sees the old
   * object or the whole new one; returns the reference. Writing it again writes it whole again.
   */
  async writeStream(uri: string, chunks: AsyncIterable<Uint8Array>): Promise<string> {
    const parsed = parseRef(uri);
    if (parsed.kind === 'obj') {
      const store = await this.#store(parsed.bucket);
      try {
        await store.put({ name: parsed.name }, Readable.toWeb(Readable.from(chunks)));
      } catch (error) {
        throw toNatsShoalError(error, `write ${parsed.name} to object store ${parsed.bucket}`);
      }
      return uri;
    }
    if (parsed.kind === 's3') {
      const s3 = this.#s3Store();
      const location = s3.locate(uri);
      await s3.writeStream(location, chunks, { contentType: location.key.endsWith('.jsonl') ? 'application/x-ndjson' : 'application/octet-stream' });
      return formatS3Uri(location);
    }
    const path = await this.#checkWritePath(parsed.path);
    try {
      await writeFileAtomically(path, chunks);
    } catch (error) {
      if (isShoalError(error)) throw error;
      throw new ShoalError(ErrorCode.UNAVAILABLE, `cannot write ${path}: ${String(error)}`, { cause: error });
    }
    return pathToFileURL(path).href;
  }

  /**
   * The data a reference points at, as a stream (a result file sent on, never held whole); the
   * same checks as get(). A missing object is INVALID_INPUT.
   */
  async openRead(ref: string, limit: ReadLimit = PAYLOAD_LIMIT): Promise<Readable> {
    const parsed = parseRef(ref);
    if (parsed.kind === 's3') {
      const s3 = this.#s3Store();
      try {
        return (await s3.openRead(s3.locate(ref), limit.maxBytes)).body;
      } catch (error) {
        if (hasErrorCode(error, ErrorCode.NOT_FOUND)) throw new ShoalError(ErrorCode.INVALID_INPUT, `${ref} does not exist`, { cause: error });
        throw error;
      }
    }
    if (parsed.kind === 'file') {
      const path = this.#checkFileName(parsed.path);
      try {
        return (await streamFileInRoots(path, { roots: this.#roots, maxBytes: limit.maxBytes, tooLarge: (size) => limit.tooLarge(size, path), outside: () => this.#outsideRoots(path) })).stream;
      } catch (error) {
        if (hasErrorCode(error, ErrorCode.NOT_FOUND)) throw new ShoalError(ErrorCode.INVALID_INPUT, isShoalError(error) ? error.message : `cannot read ${path}`, { cause: error });
        throw error;
      }
    }
    const store = await this.#store(parsed.bucket);
    try {
      const info = await store.info(parsed.name);
      if (info !== null && info.size > limit.maxBytes) throw limit.tooLarge(info.size, ref);
      const result = info === null ? null : await store.get(parsed.name);
      if (result === null) throw new ShoalError(ErrorCode.INVALID_INPUT, `${ref} does not exist (expired or never stored)`);
      return Readable.fromWeb(result.data);
    } catch (error) {
      if (isShoalError(error)) throw error;
      throw toNatsShoalError(error, `read ${ref}`);
    }
  }

  /**
   * Checks a reference to be read before anything is queued for it (an ingest run's sources):
   * the URI's form, an `s3://` bucket against the allow-list, an `obj://` bucket against the
   * deployment's, a `file://` path against the roots as written. Refusals are INVALID_INPUT;
   * get() checks all of it again, and more (links, the file's type and size), when it reads.
   */
  checkSource(ref: string): void {
    const parsed = parseRef(ref);
    if (parsed.kind === 's3') this.#s3Store().locate(ref);
    else if (parsed.kind === 'obj') this.#checkBucket(parsed.bucket);
    else this.#checkFileName(parsed.path);
  }

  /** Reads the data a reference points at; a missing object is INVALID_INPUT (retrying will not help). */
  async get(ref: string, limit: ReadLimit = PAYLOAD_LIMIT): Promise<Uint8Array> {
    const parsed = parseRef(ref);
    if (parsed.kind === 's3') {
      const s3 = this.#s3Store();
      try {
        return await s3.read(s3.locate(ref), limit.maxBytes);
      } catch (error) {
        if (hasErrorCode(error, ErrorCode.NOT_FOUND)) throw new ShoalError(ErrorCode.INVALID_INPUT, `${ref} does not exist`, { cause: error });
        if (hasErrorCode(error, ErrorCode.INPUT_TOO_LARGE) && limit !== PAYLOAD_LIMIT) throw limit.tooLarge(sizeOf(error) ?? limit.maxBytes + 1, ref);
        throw error;
      }
    }
    if (parsed.kind === 'file') {
      const path = this.#checkFileName(parsed.path);
      try {
        // Opened once and checked on that descriptor (type: a FIFO or device would block a
        // file-system thread for good; real place: a link swapped in cannot lead out of the roots;
        // size: bounded as an S3 object is, from fstat, before any byte is read), then read from it.
        return await readFileInRoots(path, { roots: this.#roots, maxBytes: limit.maxBytes, tooLarge: (size) => limit.tooLarge(size, path), outside: () => this.#outsideRoots(path) });
      } catch (error) {
        // A missing or unreadable file will not appear by retrying: the reference is bad.
        if (hasErrorCode(error, ErrorCode.NOT_FOUND)) throw new ShoalError(ErrorCode.INVALID_INPUT, isShoalError(error) ? error.message : `cannot read ${path}`, { cause: error });
        throw error;
      }
    }
    const store = await this.#store(parsed.bucket);
    let data: Uint8Array | null;
    try {
      // The object's size is in its info: a larger one is refused before its chunks are fetched.
      const info = await store.info(parsed.name);
      if (info !== null && info.size > limit.maxBytes) throw limit.tooLarge(info.size, ref);
      data = info === null ? null : await store.getBlob(parsed.name);
    } catch (error) {
      if (isShoalError(error)) throw error;
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

/** The size an INPUT_TOO_LARGE refusal names, when it names one. */
function sizeOf(error: unknown): number | undefined {
  const size = isShoalError(error) ? error.details?.['size'] : undefined;
  return typeof size === 'number' ? size : undefined;
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
