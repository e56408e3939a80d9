import { ErrorCode, ShoalError } from '../protocol/errors.js';

/**
 * `s3://bucket/key-or-prefix` references, parsed and checked once before any request is made:
 * the bucket against S3's naming rules, the key against what Shoal will send (no `.`/`..`
 * segments, which path-style servers and proxies may normalize into another key; no control
 * characters; S3's 1,024-byte key limit). The text after the bucket is taken literally: no
 * percent-decoding, and `?` or `#` are refused so a URI never means two different keys.
 */

/** S3's own limit on a key, in UTF-8 bytes. */
export const MAX_KEY_BYTES = 1024;
/** Longest `s3://` URI accepted (the wire bound of a DataRef). */
export const MAX_URI_CHARS = 2048;

export interface S3Location {
  bucket: string;
  /** The key, or a prefix (possibly empty, the whole bucket); never starts with '/'. */
  key: string;
}

function invalid(uri: string, why: string): ShoalError {
  return new ShoalError(ErrorCode.INVALID_INPUT, `"${uri.slice(0, 200)}" is not a usable s3:// URI: ${why}`);
}

/** S3 general-purpose bucket naming rules (3-63 characters, lowercase letters, digits, '.', '-'). */
export function bucketProblem(bucket: string): string | null {
  if (bucket.length < 3 || bucket.length > 63) return 'bucket names have 3 to 63 characters';
  if (!/^[a-z0-9][a-z0-9.-]*[a-z0-9]$/.test(bucket)) return 'bucket names use lowercase letters, digits, "." and "-", and start and end with a letter or digit';
  if (bucket.includes('..')) return 'bucket names have no ".." ';
  if (/^\d{1,3}(\.\d{1,3}){3}$/.test(bucket)) return 'a bucket name is not an IP address';
  if (bucket.startsWith('xn--') || bucket.endsWith('-s3alias') || bucket.endsWith('--ol-s3')) return 'reserved bucket name prefix or suffix';
  return null;
}

/** The key checks, shared by parsing and by keys Shoal builds itself (`<prefix>/<job>/part-0.jsonl`). */
export function keyProblem(key: string): string | null {
  if (Buffer.byteLength(key, 'utf8') > MAX_KEY_BYTES) return `keys have at most ${MAX_KEY_BYTES} bytes`;
  if (key.startsWith('/')) return 'the key starts with "/" (write s3://bucket/key)';
  if (/[\u0000-\u001f\u007f]/.test(key)) return 'control characters in the key';
  if (key.split('/').some((segment) => segment === '..' || segment === '.')) return '"." or ".." path segments';
  return null;
}

/** Parses `s3://bucket[/key]`; throws INVALID_INPUT naming the problem. */
export function parseS3Uri(uri: string): S3Location {
  if (uri.length > MAX_URI_CHARS) throw invalid(uri, `longer than ${MAX_URI_CHARS} characters`);
  if (!uri.startsWith('s3://')) throw invalid(uri, 'it does not start with s3://');
  if (/[?#]/.test(uri)) throw invalid(uri, '"?" and "#" are not allowed (keys are taken literally)');
  const rest = uri.slice('s3://'.length);
  const slash = rest.indexOf('/');
  const bucket = slash === -1 ? rest : rest.slice(0, slash);
  const key = slash === -1 ? '' : rest.slice(slash + 1);
  const bucketWhy = bucketProblem(bucket);
  if (bucketWhy !== null) throw invalid(uri, bucketWhy);
  const keyWhy = keyProblem(key);
  if (keyWhy !== null) throw invalid(uri, keyWhy);
  return { bucket, key };
}

export function formatS3Uri(location: S3Location): string {
  return `s3://${location.bucket}/${location.key}`;
}

/** `prefix` + `/` + `relative`, without doubled slashes; the result is checked like a parsed key. */
export function joinKey(prefix: string, relative: string): string {
  const base = prefix.replace(/\/+$/, '');
  const key = base === '' ? relative.replace(/^\/+/, '') : `${base}/${relative.replace(/^\/+/, '')}`;
  const why = keyProblem(key);
  if (why !== null) throw new ShoalError(ErrorCode.INVALID_INPUT, `S3 key "${key.slice(0, 200)}": ${why}`);
  return key;
}

/** A prefix as a folder for listing: '' stays '', 'docs' becomes 'docs/'. */
export function folderPrefix(prefix: string): string {
  return prefix === '' || prefix.endsWith('/') ? prefix : `${prefix}/`;
}
