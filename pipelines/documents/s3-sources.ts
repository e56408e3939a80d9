import { folderPrefix, parseS3Uri, type S3Store } from '../../adapters/object-store/index.js';
import { ErrorCode, ShoalError, hasErrorCode } from '../../adapters/protocol/errors.js';
import type { DocumentSource } from './document.js';

/**
 * `s3://bucket/prefix` as an ingest source: every object under the prefix, recursively, in S3's
 * listing order (ascending keys, the same on every run), filtered by the --include/--exclude
 * globs matched against the key relative to the prefix, as a folder's files are matched against
 * their path relative to the folder. A prefix that names one object is that object (its globs
 * see the last key segment, as a file named directly). Bytes are read only when the runner loads
 * the source, streamed with the document size limit; an object announced larger than the limit
 * fails without being read.
 */

export type KeyFilter = (relative: string) => boolean;

/** sources.ts's PendingSource (declared here too, so the two files import in one direction only). */
export interface S3PendingSource {
  uri: string;
  load(): Promise<{ source: DocumentSource; bytes: Uint8Array }>;
}

export interface S3SourceOptions {
  store: S3Store;
  /** Largest document read (the parse stage's limit). */
  maxBytes: number;
  /** True when an object is kept (include/exclude globs). */
  keep: KeyFilter;
  signal?: AbortSignal | undefined;
}

function s3Source(store: S3Store, bucket: string, key: string, size: number, maxBytes: number, signal: AbortSignal | undefined): S3PendingSource {
  const uri = `s3://${bucket}/${key}`;
  return {
    uri,
    load: async () => {
      if (size > maxBytes) throw new ShoalError(ErrorCode.DOCUMENT_TOO_LARGE, `${uri} has ${size} bytes, over the document limit of ${maxBytes} bytes`);
      let bytes: Buffer;
      try {
        bytes = await store.read({ bucket, key }, maxBytes, { signal });
      } catch (error) {
        if (hasErrorCode(error, ErrorCode.INPUT_TOO_LARGE)) throw new ShoalError(ErrorCode.DOCUMENT_TOO_LARGE, `${uri}: over the document limit of ${maxBytes} bytes`, { cause: error });
        throw error;
      }
      const data = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      return { source: { uri, bytes: data }, bytes: data };
    },
  };
}

export async function s3Sources(uri: string, options: S3SourceOptions): Promise<S3PendingSource[]> {
  const location = parseS3Uri(uri);
  const folder = folderPrefix(location.key);
  const out: S3PendingSource[] = [];
  let single: S3PendingSource | null = null;
  let listed = 0;
  // Listed with the prefix as written: finds `docs/...` and an object named `docs` itself.
  for await (const object of options.store.list(location, { signal: options.signal })) {
    listed += 1;
    if (object.key === location.key && location.key !== '' && !location.key.endsWith('/')) {
      const name = object.key.split('/').pop() ?? object.key;
      if (options.keep(name)) single = s3Source(options.store, location.bucket, object.key, object.size, options.maxBytes, options.signal);
      continue;
    }
    if (!object.key.startsWith(folder)) continue;
    const relative = object.key.slice(folder.length);
    // Zero-byte "folder" markers that consoles create are not documents.
    if (relative === '' || relative.endsWith('/')) continue;
    if (!options.keep(relative)) continue;
    out.push(s3Source(options.store, location.bucket, object.key, object.size, options.maxBytes, options.signal));
  }
  // Nothing at all under the prefix is most likely a typo, as a missing local folder is.
  if (listed === 0) throw new ShoalError(ErrorCode.INVALID_INPUT, `${uri}: no objects under this prefix`);
  if (single !== null) out.unshift(single);
  return out;
}
