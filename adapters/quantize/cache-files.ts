import { createHash } from 'node:crypto';
import { open, readFile, rm, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { writeFileAtomically } from '../support/atomic-write.js';

/**
 * The on-disk side of the quantized-graph cache: where it lives, content hashes, atomic writes
 * (temporary file + rename, so a reader never sees half a file) and the JSON record kept beside
 * each graph. The record is written last: its presence says the graph next to it is complete,
 * and the hashes in it let a damaged graph be detected and rebuilt.
 */

/** The quantized graphs' folder inside Shoal's cache folder (runtime option `cacheDir`, SHOAL_CACHE_DIR). */
export function quantizedCacheDir(cacheRoot: string): string {
  return join(cacheRoot, 'quantized');
}

/**
 * SHA-256 of a file, read through one reused 1 MiB buffer: streaming a large graph through fresh
 * chunks would leave tens of MB of garbage in the model thread's resident memory.
 */
export async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256');
  const buffer = Buffer.allocUnsafe(1024 * 1024);
  const handle = await open(path, 'r');
  try {
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
      if (bytesRead === 0) break;
      hash.update(buffer.subarray(0, bytesRead));
    }
  } finally {
    await handle.close();
  }
  return hash.digest('hex');
}

/** What `rememberedSha256` keeps of a file: the stat it was hashed at, and the hash. */
const RememberedHash = z.strictObject({
  path: z.string(),
  bytes: z.number().int().nonnegative(),
  ino: z.number(),
  mtimeMs: z.number(),
  ctimeMs: z.number(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});

/**
 * SHA-256 of a file, remembered in `<cacheDir>/sources/` with the file's size, inode, mtime and
 * ctime at hashing time: an int8 load needs the float graph's hash for its cache key, and
 * re-reading a 90 MB graph to get it cost 0.12-0.13 s of a two-second `shoal encode`. Any write
 * to a file moves its ctime, which (unlike mtime) no tool can set back, so an unchanged stat
 * means unchanged bytes. The stat is taken before hashing: a file changed while being read is
 * hashed again next time. File times move in coarse ticks (a few ms), so a file written again
 * within a tick of being hashed could keep its stat: like git's "racy" index entries, a file
 * changed less than `settleMs` before it was hashed is not remembered. A cache folder that cannot
 * be written only loses the shortcut.
 */
export async function rememberedSha256(path: string, cacheDir: string, settleMs = 2_000): Promise<string> {
  const absolute = resolve(path);
  const memo = join(cacheDir, 'sources', `${sha256Text(absolute)}.json`);
  const info = await stat(absolute);
  const known = await readRecord(memo, RememberedHash);
  const same = (record: z.infer<typeof RememberedHash>): boolean =>
    record.path === absolute && record.bytes === info.size && record.ino === info.ino && record.mtimeMs === info.mtimeMs && record.ctimeMs === info.ctimeMs;
  if (known !== null && same(known)) return known.sha256;
  const hashedAt = Date.now();
  const sha256 = await sha256File(absolute);
  if (hashedAt - Math.max(info.mtimeMs, info.ctimeMs) < settleMs) return sha256;
  const record = { path: absolute, bytes: info.size, ino: info.ino, mtimeMs: info.mtimeMs, ctimeMs: info.ctimeMs, sha256 };
  await writeRecord(memo, record).catch(() => undefined);
  return sha256;
}

export function sha256Text(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Writes `chunks` to `target` atomically (adapters/support/atomic-write.ts), worded for the cache. */
export async function writeAtomically(target: string, chunks: readonly Uint8Array[]): Promise<void> {
  try {
    await writeFileAtomically(target, chunks);
  } catch (error) {
    throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `cannot write ${target} (set SHOAL_CACHE_DIR to a writable folder): ${String(error)}`, {
      cause: error,
    });
  }
}

export const FileFingerprint = z.strictObject({
  /** Relative to the folder of the file it belongs to (the source graph, or the cache). */
  file: z.string(),
  bytes: z.number().int().nonnegative(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  /** Modification time when hashed: an unchanged size and time skip re-hashing large external data. */
  mtimeMs: z.number().optional(),
});
export type FileFingerprint = z.infer<typeof FileFingerprint>;

export async function fingerprint(dir: string, file: string, withTime = false): Promise<FileFingerprint> {
  const path = join(dir, file);
  const info = await stat(path);
  const print: FileFingerprint = { file, bytes: info.size, sha256: await sha256File(path) };
  if (withTime) print.mtimeMs = info.mtimeMs;
  return print;
}

/**
 * Writes `dir/file` atomically and returns its fingerprint (with its time), hashed from the bytes
 * in memory: reading back a graph just written only to hash it cost about 0.1 s a 90 MB graph.
 */
export async function writeFingerprinted(dir: string, file: string, chunks: readonly Uint8Array[]): Promise<FileFingerprint> {
  const path = join(dir, file);
  await writeAtomically(path, chunks);
  const hash = createHash('sha256');
  let bytes = 0;
  for (const chunk of chunks) {
    hash.update(chunk);
    bytes += chunk.byteLength;
  }
  // The size and hash are those of the bytes written: should the file differ from them by the
  // next load (damaged, or replaced by another writer), `matches` fails and the entry is rebuilt.
  return { file, bytes, sha256: hash.digest('hex'), mtimeMs: (await stat(path)).mtimeMs };
}

/** Whether `dir/print.file` still has the recorded content (a missing file does not). */
export async function matches(dir: string, print: FileFingerprint): Promise<boolean> {
  const path = join(dir, print.file);
  let info;
  try {
    info = await stat(path);
  } catch {
    return false;
  }
  if (info.size !== print.bytes) return false;
  if (print.mtimeMs !== undefined && info.mtimeMs === print.mtimeMs) return true;
  return (await sha256File(path)) === print.sha256;
}

/** Reads a JSON record through `schema`; null when absent or unreadable (it is then rebuilt). */
export async function readRecord<S extends z.ZodType>(path: string, schema: S): Promise<z.output<S> | null> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    return null;
  }
  try {
    const parsed = schema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

export async function writeRecord(path: string, record: unknown): Promise<void> {
  await writeAtomically(path, [Buffer.from(`${JSON.stringify(record, null, 2)}\n`)]);
}

export async function removeQuietly(path: string): Promise<void> {
  await rm(path, { force: true });
}
