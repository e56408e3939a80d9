import type { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { createS3Client } from './client.js';
import { isMissing } from './errors.js';
import { listObjects, type ListedObject } from './list.js';
import { openObjectStream, readObjectBytes } from './read.js';
import { withRetry, type RetryEvent, type RetryOptions } from './retry.js';
import { s3Sdk } from './sdk.js';
import { resolveS3Settings, type S3Settings, type S3SettingsInput } from './settings.js';
import { folderPrefix, parseS3Uri, type S3Location } from './uri.js';
import { writeObject, writeObjectStream, type WriteResult } from './write.js';

/**
 * S3 as Shoal uses it: one client from the settings, the bucket allow-list, and the operations
 * (list, streaming and whole reads with a byte limit, atomic writes, deletes), each retried
 * within the settings' budget. Everything else (payload references, ingest sources, the S3 sink)
 * goes through this class, never through the SDK directly.
 */

export interface S3StoreOptions {
  /** Uses this client instead of building one (tests, shared clients); it is not destroyed by close(). */
  client?: S3Client;
  /** Told of every retry of an operation (a worker logs it and counts it in shoal_s3_retries_total). */
  onRetry?: (event: RetryEvent) => void;
  /** Told of every operation that succeeded (an ingest run clears its degraded mark with it). */
  onSuccess?: (what: string) => void;
}

export interface CallOptions {
  signal?: AbortSignal | undefined;
}

export class S3Store {
  readonly settings: S3Settings;
  /** Built at the first operation (the SDK is loaded then, see sdk.ts). */
  #client: Promise<S3Client> | null;
  readonly #ownsClient: boolean;
  readonly #onRetry: ((event: RetryEvent) => void) | undefined;
  readonly #onSuccess: ((what: string) => void) | undefined;

  constructor(settings: S3SettingsInput | S3Settings = {}, options: S3StoreOptions = {}) {
    this.settings = resolveS3Settings(settings);
    this.#client = options.client === undefined ? null : Promise.resolve(options.client);
    this.#ownsClient = options.client === undefined;
    this.#onRetry = options.onRetry;
    this.#onSuccess = options.onSuccess;
  }

  /** The SDK client (built on first call). */
  client(): Promise<S3Client> {
    this.#client ??= createS3Client(this.settings);
    return this.#client;
  }

  #retry(signal?: AbortSignal): RetryOptions {
    return { budgetMs: this.settings.operationRetryMs, signal, onRetry: this.#onRetry, onSuccess: this.#onSuccess };
  }

  /**
   * Parses a URI and checks its bucket against the allow-list (job references and result
   * targets come from callers; a worker must not read or write buckets it was not meant to).
   */
  locate(uri: string): S3Location {
    const location = parseS3Uri(uri);
    const allowed = this.settings.allowedBuckets;
    if (allowed !== null && !allowed.includes(location.bucket)) {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `s3://${location.bucket} is not an allowed bucket here (allowed: ${allowed.join(', ') || 'none'}; SHOAL_S3_BUCKETS)`);
    }
    return location;
  }

  /** Objects whose key starts with the location's key (a raw prefix: `docs` also lists `docs2/...`), recursively, in S3's key order. */
  async *list(location: S3Location, options: CallOptions = {}): AsyncGenerator<ListedObject> {
    yield* listObjects(await this.client(), location.bucket, location.key, this.#retry(options.signal));
  }

  /** Objects under `location` taken as a folder (`docs` lists `docs/...`, not `docs2`). */
  async *listFolder(location: S3Location, options: CallOptions = {}): AsyncGenerator<ListedObject> {
    yield* listObjects(await this.client(), location.bucket, folderPrefix(location.key), this.#retry(options.signal));
  }

  /** A byte-limited stream of the object (INPUT_TOO_LARGE past `maxBytes`). */
  async openRead(location: S3Location, maxBytes: number, options: CallOptions = {}): Promise<{ body: Readable; size: number }> {
    return openObjectStream(await this.client(), location.bucket, location.key, { ...this.#retry(options.signal), maxBytes });
  }

  /** The whole object (NOT_FOUND when missing, INPUT_TOO_LARGE past `maxBytes`). */
  async read(location: S3Location, maxBytes: number, options: CallOptions = {}): Promise<Buffer> {
    return readObjectBytes(await this.client(), location.bucket, location.key, { ...this.#retry(options.signal), maxBytes });
  }

  /** The object, or null when there is none. */
  async readIfExists(location: S3Location, maxBytes: number, options: CallOptions = {}): Promise<Buffer | null> {
    try {
      return await this.read(location, maxBytes, options);
    } catch (error) {
      if (isMissing(error)) return null;
      throw error;
    }
  }

  /** Writes the object atomically (PutObject, or a multipart upload over `partBytes`). */
  async write(location: S3Location, body: Uint8Array, options: CallOptions & { contentType?: string; onPart?: (part: number, parts: number) => void } = {}): Promise<WriteResult> {
    return writeObject(await this.client(), location.bucket, location.key, body, {
      ...this.#retry(options.signal),
      partBytes: this.settings.partBytes,
      partConcurrency: this.settings.partConcurrency,
      ...(options.contentType === undefined ? {} : { contentType: options.contentType }),
      ...(options.onPart === undefined ? {} : { onPart: options.onPart }),
    });
  }

  /** Writes a stream of bytes as one object, atomically, holding one part at most (writeObjectStream). */
  async writeStream(location: S3Location, body: AsyncIterable<Uint8Array>, options: CallOptions & { contentType?: string } = {}): Promise<WriteResult> {
    return writeObjectStream(await this.client(), location.bucket, location.key, body, {
      ...this.#retry(options.signal),
      partBytes: this.settings.partBytes,
      partConcurrency: 1,
      ...(options.contentType === undefined ? {} : { contentType: options.contentType }),
    });
  }

  /** Deletes the object; a missing one is fine (S3 answers deletes of missing keys with success anyway). */
  async delete(location: S3Location, options: CallOptions = {}): Promise<void> {
    const client = await this.client();
    const { DeleteObjectCommand } = await s3Sdk();
    await withRetry(
      `delete s3://${location.bucket}/${location.key}`,
      async () => {
        try {
          await client.send(new DeleteObjectCommand({ Bucket: location.bucket, Key: location.key }), { abortSignal: options.signal });
        } catch (error) {
          if (!isMissing(error)) throw error;
        }
      },
      this.#retry(options.signal),
    );
  }

  close(): void {
    const client = this.#client;
    this.#client = null;
    // A client whose creation failed holds no connections: nothing to release then.
    if (this.#ownsClient && client !== null) void client.then((built) => built.destroy(), () => undefined);
  }
}
