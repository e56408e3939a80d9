import type { S3Client } from '@aws-sdk/client-s3';
import { s3Sdk } from './sdk.js';
import { withRetry, type RetryOptions } from './retry.js';

/**
 * Every object under a prefix, page by page (ListObjectsV2, 1,000 keys a page, each page retried
 * on its own), in S3's order: ascending UTF-8 key order, the same on every run. "Folders" are not
 * special: the listing is recursive.
 */

export interface ListedObject {
  key: string;
  size: number;
  etag: string | null;
}

export interface ListOptions extends RetryOptions {
  /** Keys per page (S3 caps it at 1000). @default 1000 */
  pageSize?: number;
}

export async function* listObjects(client: S3Client, bucket: string, prefix: string, options: ListOptions): AsyncGenerator<ListedObject> {
  const { ListObjectsV2Command } = await s3Sdk();
  let token: string | undefined;
  do {
    const page = await withRetry(
      `list s3://${bucket}/${prefix}`,
      () =>
        client.send(
          new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix === '' ? undefined : prefix, ContinuationToken: token, MaxKeys: options.pageSize ?? 1000 }),
          { abortSignal: options.signal },
        ),
      options,
    );
    for (const object of page.Contents ?? []) {
      if (object.Key === undefined) continue;
      yield { key: object.Key, size: object.Size ?? 0, etag: object.ETag ?? null };
    }
    token = page.IsTruncated === true ? page.NextContinuationToken : undefined;
  } while (token !== undefined);
}
