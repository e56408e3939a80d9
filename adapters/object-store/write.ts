import type { CompletedPart, S3Client } from '@aws-sdk/client-s3';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { isMissing, s3ErrorName, toS3Error } from './errors.js';
import { withRetry, type RetryOptions } from './retry.js';
import { s3Sdk } from './sdk.js';

/**
 * Atomic writes: a reader sees the old object or the whole new one under a key, never a part.
 * PutObject is atomic for one request; a body over `partBytes` goes up as a multipart upload,
 * whose object only appears when CompleteMultipartUpload succeeds. Any failure aborts the upload,
 * so its parts are dropped and nothing partial remains (an abort that cannot reach the server
 * leaves only invisible parts, which a bucket lifecycle rule AbortIncompleteMultipartUpload
 * removes; docs/storage.md). Each request is retried on its own within the budget: a part is
 * idempotent by number, so a part retried after a lost answer is simply replaced.
 */

export interface WriteOptions extends RetryOptions {
  partBytes: number;
  /** Parts in flight at once. */
  partConcurrency: number;
  contentType?: string;
  /** Called after each part is stored (progress; tests use it to interrupt an upload). */
  onPart?: (partNumber: number, parts: number) => void;
}

export interface WriteResult {
  /** Parts of the multipart upload, 1 for a single PutObject. */
  parts: number;
  etag: string | null;
}

export async function writeObject(client: S3Client, bucket: string, key: string, body: Uint8Array, options: WriteOptions): Promise<WriteResult> {
  const uri = `s3://${bucket}/${key}`;
  const { PutObjectCommand } = await s3Sdk();
  if (body.byteLength <= options.partBytes) {
    const answer = await withRetry(
      `write ${uri}`,
      () => client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentLength: body.byteLength, ContentType: options.contentType }), { abortSignal: options.signal }),
      options,
    );
    return { parts: 1, etag: answer.ETag ?? null };
  }
  return multipart(client, bucket, key, body, options);
}

/** Starts a multipart upload of `bucket/key` (retried as every request is) and returns its upload id. */
async function startMultipart(client: S3Client, bucket: string, key: string, options: WriteOptions): Promise<string> {
  const uri = `s3://${bucket}/${key}`;
  const { CreateMultipartUploadCommand } = await s3Sdk();
  const created = await withRetry(
    `start a multipart upload of ${uri}`,
    () => client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ContentType: options.contentType }), { abortSignal: options.signal }),
    options,
  );
  if (created.UploadId === undefined) throw new ShoalError(ErrorCode.UNAVAILABLE, `start a multipart upload of ${uri}: the server returned no upload id`);
  return created.UploadId;
}

async function multipart(client: S3Client, bucket: string, key: string, body: Uint8Array, options: WriteOptions): Promise<WriteResult> {
  const uri = `s3://${bucket}/${key}`;
  const { UploadPartCommand } = await s3Sdk();
  const uploadId = await startMultipart(client, bucket, key, options);
  const count = Math.ceil(body.byteLength / options.partBytes);
  const done: CompletedPart[] = new Array<CompletedPart>(count);
  try {
    let next = 0;
    const uploader = async (): Promise<void> => {
      while (next < count) {
        const index = next++;
        const slice = body.subarray(index * options.partBytes, Math.min(body.byteLength, (index + 1) * options.partBytes));
        const answer = await withRetry(
          `upload part ${index + 1} of ${count} of ${uri}`,
          () => client.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId: uploadId, PartNumber: index + 1, Body: slice, ContentLength: slice.byteLength }), { abortSignal: options.signal }),
          options,
        );
        done[index] = { PartNumber: index + 1, ETag: answer.ETag };
        options.onPart?.(index + 1, count);
        if (options.signal?.aborted === true) throw new ShoalError(ErrorCode.CANCELLED, `write ${uri}: cancelled`);
      }
    };
    await Promise.all(Array.from({ length: Math.min(options.partConcurrency, count) }, uploader));
    const answer = await complete(client, bucket, key, uploadId, done, body.byteLength, options);
    return { parts: count, etag: answer };
  } catch (error) {
    await abort(client, bucket, key, uploadId, options.budgetMs);
    throw toS3Error(error, `write ${uri}`);
  }
}

/**
 * Writes a stream of bytes atomically without holding it whole: up to `partBytes` are gathered;
 * a stream that ends within them is one PutObject, a longer one a multipart upload whose parts go
 * up one by one as they fill (memory: one part). Any failure aborts the upload.
 */
export async function writeObjectStream(client: S3Client, bucket: string, key: string, chunks: AsyncIterable<Uint8Array>, options: WriteOptions): Promise<WriteResult> {
  const uri = `s3://${bucket}/${key}`;
  const iterator = chunks[Symbol.asyncIterator]();
  let pending: Uint8Array[] = [];
  let pendingBytes = 0;
  let ended = false;
  /** The next part's bytes (up to partBytes; less only at the end of the stream). */
  const fill = async (): Promise<Uint8Array> => {
    while (!ended && pendingBytes < options.partBytes) {
      const next = await iterator.next();
      if (next.done === true) ended = true;
      else if (next.value.byteLength > 0) {
        pending.push(next.value);
        pendingBytes += next.value.byteLength;
      }
    }
    const joined = Buffer.concat(pending);
    const part = joined.subarray(0, Math.min(options.partBytes, joined.byteLength));
    const rest = joined.subarray(part.byteLength);
    pending = rest.byteLength > 0 ? [rest] : [];
    pendingBytes = rest.byteLength;
    return part;
  };
  const first = await fill();
  if (ended && pendingBytes === 0) return writeObject(client, bucket, key, first, options);
  const { UploadPartCommand } = await s3Sdk();
  const uploadId = await startMultipart(client, bucket, key, options);
  const done: CompletedPart[] = [];
  let size = 0;
  try {
    for (let part: Uint8Array = first; part.byteLength > 0; part = await fill()) {
      const number = done.length + 1;
      const body = part;
      const answer = await withRetry(
        `upload part ${number} of ${uri}`,
        () => client.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId: uploadId, PartNumber: number, Body: body, ContentLength: body.byteLength }), { abortSignal: options.signal }),
        options,
      );
      done.push({ PartNumber: number, ETag: answer.ETag });
      size += body.byteLength;
      options.onPart?.(number, 0);
      if (options.signal?.aborted === true) throw new ShoalError(ErrorCode.CANCELLED, `write ${uri}: cancelled`);
    }
    return { parts: done.length, etag: await complete(client, bucket, key, uploadId, done, size, options) };
  } catch (error) {
    await abort(client, bucket, key, uploadId, options.budgetMs);
    throw toS3Error(error, `write ${uri}`);
  }
}

/**
 * Completes the upload. A Complete retried after its answer was lost finds the upload gone
 * (NoSuchUpload): the object is then checked to be there with the expected size. Not cancelled
 * by the signal: once the parts are up, finishing is cheaper than leaving the upload behind.
 */
async function complete(client: S3Client, bucket: string, key: string, uploadId: string, parts: CompletedPart[], size: number, options: WriteOptions): Promise<string | null> {
  const uri = `s3://${bucket}/${key}`;
  const { CompleteMultipartUploadCommand, HeadObjectCommand } = await s3Sdk();
  return withRetry(
    `complete the multipart upload of ${uri}`,
    async () => {
      try {
        const answer = await client.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId, MultipartUpload: { Parts: parts } }));
        return answer.ETag ?? null;
      } catch (error) {
        // Also after the SDK's own retry of a Complete whose first answer was lost.
        if (s3ErrorName(error) === 'NoSuchUpload') {
          const head = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
          if (head.ContentLength === size) return head.ETag ?? null;
        }
        throw error;
      }
    },
    { ...options, signal: undefined },
  );
}

/** Best effort within a short budget: the upload's parts are dropped, nothing became visible anyway. */
async function abort(client: S3Client, bucket: string, key: string, uploadId: string, budgetMs: number): Promise<void> {
  const { AbortMultipartUploadCommand } = await s3Sdk();
  await withRetry(
    `abort the multipart upload of s3://${bucket}/${key}`,
    async () => {
      try {
        await client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId }));
      } catch (error) {
        if (!isMissing(error)) throw error;
      }
    },
    { budgetMs: Math.min(budgetMs, 10_000) },
  ).catch(() => undefined);
}
