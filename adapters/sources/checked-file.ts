import { constants, type Stats } from 'node:fs';
import { open, readlink, realpath, stat, type FileHandle } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { isInsideRoot } from './path-roots.js';

/**
 * Reading a file a caller named, checked on the file actually opened. The file is opened once and
 * everything is decided on that descriptor: its type and size (fstat: a FIFO or device is refused
 * before a byte is read, an oversized file before it costs memory) and, with roots, where it
 * really is (Linux: the kernel's own path of the open file, /proc/self/fd/N), and the bytes come
 * from the same descriptor. Checking a path and then reading it by name let a link swapped in
 * between lead the read out of the roots (issue 42: 3 of 600 swapped reads read an outside file).
 */

export interface CheckedReadOptions {
  /** Largest file read; a larger one is refused from its fstat size, unread. */
  maxBytes: number;
  /** The refusal of an oversized file (INPUT_TOO_LARGE for payloads and images, DOCUMENT_TOO_LARGE for documents). */
  tooLarge: (size: number) => ShoalError;
}

export interface RootedReadOptions extends CheckedReadOptions {
  /** Folders the file must really lie in (links resolved), as configured. */
  roots: readonly string[];
  /** The refusal of a file outside the roots (the caller's wording: which setting to change). */
  outside: () => ShoalError;
}

/** A file that grew after its fstat is read on in pieces this large, so it is caught at the limit, not after it. */
const GROWTH_CHUNK_BYTES = 1024 * 1024;

function fsCode(error: unknown): string {
  return error instanceof Error && 'code' in error ? String(error.code) : '';
}

function fileKind(info: Stats): string {
  if (info.isDirectory()) return 'a folder';
  if (info.isFIFO()) return 'a named pipe';
  if (info.isSocket()) return 'a socket';
  if (info.isCharacterDevice() || info.isBlockDevice()) return 'a device';
  return 'not a file';
}

async function openForReading(path: string): Promise<FileHandle> {
  try {
    // Non-blocking: opening a FIFO for reading would otherwise wait for a writer (a thread lost for good).
    return await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (error) {
    const code = fsCode(error);
    const gone = code === 'ENOENT' || code === 'ENOTDIR';
    const why = gone ? 'no such file' : code === 'ELOOP' ? 'a loop of symbolic links' : code === 'EACCES' || code === 'EPERM' ? 'permission denied' : error instanceof Error ? error.message : String(error);
    // Retrying cannot make a missing or forbidden file readable: NOT_FOUND; anything else (EMFILE, EIO) may pass.
    const lasting = gone || ['ELOOP', 'EACCES', 'EPERM', 'ENAMETOOLONG'].includes(code);
    throw new ShoalError(lasting ? ErrorCode.NOT_FOUND : ErrorCode.UNAVAILABLE, `cannot read ${path}: ${why}`, { cause: error });
  }
}

/**
 * Where the open file really is. Linux names it: the link /proc/self/fd/N is the kernel's path of
 * the inode that was opened, whatever the name now points at. Elsewhere: the real path of the
 * name, accepted only when it is still the opened file (same device and inode).
 */
async function openedPath(handle: FileHandle, path: string, info: Stats): Promise<string | null> {
  const named = await readlink(`/proc/self/fd/${handle.fd}`).catch(() => null);
  if (named !== null && named.startsWith('/')) return named.endsWith(' (deleted)') ? null : named;
  const real = await realpath(path).catch(() => null);
  if (real === null) return null;
  const now = await stat(real).catch(() => null);
  return now !== null && now.dev === info.dev && now.ino === info.ino ? real : null;
}

/**
 * The file's bytes from the descriptor: the size fstat gave, read into one buffer of its own (not
 * Node's shared pool, so it can be transferred to a thread; a plain Uint8Array, which pdfjs
 * insists on); a file that shrank meanwhile gives what is there, one that grew is read on only up
 * to `maxBytes`.
 */
async function readBounded(handle: FileHandle, size: number, options: CheckedReadOptions): Promise<Uint8Array> {
  const first = new Uint8Array(size);
  let total = 0;
  while (total < size) {
    const { bytesRead } = await handle.read(first, total, size - total, null);
    if (bytesRead === 0) return first.subarray(0, total);
    total += bytesRead;
  }
  const more: Uint8Array[] = [];
  for (;;) {
    const chunk = new Uint8Array(GROWTH_CHUNK_BYTES);
    const { bytesRead } = await handle.read(chunk, 0, chunk.length, null);
    if (bytesRead === 0) break;
    total += bytesRead;
    if (total > options.maxBytes) throw options.tooLarge(total);
    more.push(chunk.subarray(0, bytesRead));
  }
  if (more.length === 0) return first;
  const whole = new Uint8Array(total);
  whole.set(first, 0);
  let offset = first.length;
  for (const part of more) {
    whole.set(part, offset);
    offset += part.length;
  }
  return whole;
}

async function readOpened(handle: FileHandle, path: string, options: CheckedReadOptions, where?: (info: Stats) => Promise<void>): Promise<Uint8Array> {
  const info = await handle.stat();
  if (!info.isFile()) throw new ShoalError(ErrorCode.INVALID_INPUT, `${path} is not a regular file (${fileKind(info)})`);
  await where?.(info);
  // Before any byte is read: a 400 MB (even sparse) file costs nothing to refuse.
  if (info.size > options.maxBytes) throw options.tooLarge(info.size);
  return readBounded(handle, info.size, options);
}

/** A regular file's bytes, type and size checked on the opened descriptor before it is read. */
export async function readRegularFile(path: string, options: CheckedReadOptions): Promise<Uint8Array> {
  const handle = await openForReading(path);
  try {
    return await readOpened(handle, path, options);
  } finally {
    await handle.close();
  }
}

/** Opens `path` inside `roots` and checks the opened file (type, real place, size); the handle is the caller's to close. */
async function openInRoots(path: string, options: RootedReadOptions): Promise<{ handle: FileHandle; absolute: string; size: number }> {
  const absolute = resolve(path);
  const written = options.roots.map((root) => resolve(root));
  const realRoots = await Promise.all(written.map(async (root) => realpath(root).catch(() => root)));
  // A root may be named as configured or by its real path (a root that is itself a link).
  if (![...written, ...realRoots].some((root) => isInsideRoot(root, absolute))) throw options.outside();
  const handle = await openForReading(absolute);
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw new ShoalError(ErrorCode.INVALID_INPUT, `${absolute} is not a regular file (${fileKind(info)})`);
    const real = await openedPath(handle, absolute, info);
    if (real === null || !realRoots.some((root) => isInsideRoot(root, real))) throw options.outside();
    // Before any byte is read: a 400 MB (even sparse) file costs nothing to refuse.
    if (info.size > options.maxBytes) throw options.tooLarge(info.size);
    return { handle, absolute, size: info.size };
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/**
 * A regular file inside `roots`: the name must be inside a root as written (nothing outside them
 * is even opened), and the file opened must really lie inside a root's real path; then it is
 * read from that descriptor. A missing file and one outside the roots are told apart only for
 * names inside the roots.
 */
export async function readFileInRoots(path: string, options: RootedReadOptions): Promise<Uint8Array> {
  const { handle, size } = await openInRoots(path, options);
  try {
    return await readBounded(handle, size, options);
  } finally {
    await handle.close();
  }
}

/**
 * The same checks as readFileInRoots, then the file as a stream from the descriptor opened (a
 * large result file is sent on, never held whole). The stream closes the descriptor when it ends
 * or is destroyed.
 */
export async function streamFileInRoots(path: string, options: RootedReadOptions): Promise<{ stream: Readable; size: number }> {
  const { handle, size } = await openInRoots(path, options);
  return { stream: handle.createReadStream({ autoClose: true }), size };
}
