import { Readable, Transform, type TransformCallback } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { toS3Error } from './errors.js';
import { withRetry, type RetryOptions } from './retry.js';
import { s3Sdk } from './sdk.js';

/**
 * Streaming reads with a byte limit. The request is retried until the object starts flowing; a
 * body cut off mid-stream fails the read (the caller retries the whole read, see readObjectBytes),
 * since resuming at an offset could mix two versions of an object overwritten in between. The
 * limit is checked against Content-Length before any byte is read, and again while counting, so a
 * server that lies about the length cannot push more than the limit into memory.
 */

export interface ReadOptions extends RetryOptions {
  /** Largest object accepted; larger ones fail with INPUT_TOO_LARGE. */
  maxBytes: number;
}

export interface ObjectStream {
  body: Readable;
  /** Content-Length as the server announced it. */
  size: number;
}

function tooLarge(uri: string, size: number, limit: number): ShoalError {
  return new ShoalError(ErrorCode.INPUT_TOO_LARGE, `${uri} has ${size} bytes, over the limit of ${limit} bytes`, { details: { size, limit } });
}

class ByteLimit extends Transform {
  #seen = 0;
  readonly #limit: number;
  readonly #uri: string;

  constructor(uri: string, limit: number) {
    super();
    this.#uri = uri;
    this.#limit = limit;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.#seen += chunk.byteLength;
    if (this.#seen > this.#limit) callback(tooLarge(this.#uri, this.#seen, this.#limit));
    else callback(null, chunk);
  }
}

export async function openObjectStream(client: S3Client, bucket: string, key: string, options: ReadOptions): Promise<ObjectStream> {
  const uri = `s3://${bucket}/${key}`;
  const { GetObjectCommand } = await s3Sdk();
  const answer = await withRetry(`read ${uri}`, () => client.send(new GetObjectCommand({ Bucket: bucket, Key: key }), { abortSignal: options.signal }), options);
  const size = answer.ContentLength ?? 0;
  const raw = answer.Body;
  if (!(raw instanceof Readable)) throw new ShoalError(ErrorCode.INTERNAL, `read ${uri}: the S3 client returned no Node stream`);
  if (size > options.maxBytes) {
    raw.destroy();
    throw tooLarge(uri, size, options.maxBytes);
  }
  const limited = new ByteLimit(uri, options.maxBytes);
  raw.on('error', (error) => limited.destroy(toS3Error(error, `read ${uri}`)));
  return { body: raw.pipe(limited), size };
}

async function collect(stream: ObjectStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream.body) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** The whole object in memory; a read cut off mid-body is retried from the start within the budget. */
export async function readObjectBytes(client: S3Client, bucket: string, key: string, options: ReadOptions): Promise<Buffer> {
  return withRetry(`read s3://${bucket}/${key}`, async () => collect(await openObjectStream(client, bucket, key, { ...options, budgetMs: 0 })), options);
}
