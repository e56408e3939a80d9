import { once } from 'node:events';
import { createReadStream, createWriteStream, type WriteStream } from 'node:fs';
import { open, rename, rm, stat, truncate } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Writable } from 'node:stream';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';

/**
 * Where result lines go: stdout, or `--out FILE`. A file is written as `FILE.partial` while the run
 * lasts and renamed to FILE on success, so a file named FILE is always complete; after a failure
 * or an interrupt (Ctrl-C, SIGTERM, even a kill) the finished lines stay in FILE.partial, and
 * `--resume` appends to it after its last complete line instead of starting over.
 */

/** Where result lines go. `write` respects backpressure; `finish` makes the output final. */
export interface LineOutput {
  readonly name: string;
  readonly linesWritten: number;
  /** With --resume: the complete lines already in FILE.partial (skipped in the input), and the last one's id. */
  readonly resumed: ResumePoint | null;
  write(lines: readonly string[]): Promise<void>;
  finish(): Promise<void>;
  /** After a failure: keeps what was written as `<file>.partial` and returns that path, or null. */
  abort(): Promise<string | null>;
}

export interface ResumePoint {
  /** Complete result lines in FILE.partial: the input's first this-many non-blank lines are done. */
  lines: number;
  /** The `id` of the last of them, to check that the partial output belongs to this input. */
  lastId: string | number | null;
}

export interface LineOutputOptions {
  /** Continue FILE.partial of an interrupted run instead of refusing to overwrite it. */
  resume?: boolean;
}

export function describeFsError(error: unknown): string {
  if (error instanceof Error && 'code' in error && typeof error.code === 'string') {
    if (error.code === 'ENOENT') return 'no such file';
    if (error.code === 'EACCES') return 'permission denied';
  }
  return error instanceof Error ? error.message : String(error);
}

/** Thrown when the reader of stdout went away (`shoal ... | head`): not a failure of shoal. */
export function isBrokenPipe(error: unknown): boolean {
  return error instanceof ShoalError && error.code === ErrorCode.CANCELLED && error.details?.reason === 'broken-pipe';
}

async function writeAll(stream: Writable, text: string): Promise<void> {
  if (!stream.write(text)) await once(stream, 'drain');
}

/**
 * Writes lines to a stream, reporting the stream's own error (a closed pipe, a full disk) ahead
 * of the write's; returns how many lines were written.
 */
async function writeLines(stream: Writable, lines: readonly string[], failure: () => unknown): Promise<number> {
  const before = failure();
  if (before !== null) throw before;
  if (lines.length === 0) return 0;
  try {
    await writeAll(stream, `${lines.join('\n')}\n`);
  } catch (error) {
    throw failure() ?? error;
  }
  const after = failure();
  if (after !== null) throw after;
  return lines.length;
}

class StreamLineOutput implements LineOutput {
  readonly name: string;
  readonly resumed = null;
  readonly #stream: Writable;
  /** stdout stays open for whoever prints after us; a stream we opened is ended by finish(). */
  readonly #owned: boolean;
  #failure: unknown = null;
  #count = 0;

  constructor(name: string, stream: Writable, owned: boolean) {
    this.name = name;
    this.#stream = stream;
    this.#owned = owned;
    stream.on('error', (error: NodeJS.ErrnoException) => {
      this.#failure =
        error.code === 'EPIPE'
          ? new ShoalError(ErrorCode.CANCELLED, 'the output pipe was closed', { details: { reason: 'broken-pipe' } })
          : new ShoalError(ErrorCode.INTERNAL, `cannot write to ${name}: ${error.message}`, { cause: error });
    });
  }

  get linesWritten(): number {
    return this.#count;
  }

  async write(lines: readonly string[]): Promise<void> {
    this.#count += await writeLines(this.#stream, lines, () => this.#failure);
  }

  async finish(): Promise<void> {
    if (this.#failure !== null) throw this.#failure;
    if (this.#owned) {
      this.#stream.end();
      await once(this.#stream, 'finish');
    } else if (this.#stream.writableNeedDrain) {
      await once(this.#stream, 'drain');
    }
  }

  async abort(): Promise<string | null> {
    if (this.#owned) this.#stream.destroy();
    return null;
  }
}

/** The id of a result line, or null when it has none (or is not JSON). */
function isJson(line: string): boolean {
  try {
    JSON.parse(line);
    return true;
  } catch {
    return false;
  }
}

function idOf(line: string): string | number | null {
  try {
    const value: unknown = JSON.parse(line);
    if (typeof value !== 'object' || value === null || !('id' in value)) return null;
    return typeof value.id === 'string' || typeof value.id === 'number' ? value.id : null;
  } catch {
    return null;
  }
}

/**
 * Counts the complete lines of an earlier run's FILE.partial without reading it into memory, cuts
 * off a last line the interrupt left half-written, and reads the id of the last complete line.
 */
async function resumePoint(partial: string): Promise<ResumePoint> {
  let lines = 0;
  let offset = 0;
  let lastNewline = -1;
  let previousNewline = -1;
  for await (const data of createReadStream(partial, { highWaterMark: 1024 * 1024 })) {
    const buffer = Buffer.isBuffer(data) ? data : Buffer.from(String(data));
    for (let at = buffer.indexOf(10); at !== -1; at = buffer.indexOf(10, at + 1)) {
      lines++;
      previousNewline = lastNewline;
      lastNewline = offset + at;
    }
    offset += buffer.length;
  }
  if (lastNewline + 1 < offset) await truncate(partial, lastNewline + 1);
  if (lines === 0) return { lines: 0, lastId: null };
  // The last complete line lies between the two last newlines; read just that slice.
  const handle = await open(partial, 'r');
  try {
    const length = lastNewline - previousNewline - 1;
    const slice = Buffer.alloc(length);
    await handle.read(slice, 0, length, previousNewline + 1);
    const last = slice.toString('utf8');
    if (!isJson(last)) {
      // Every line Shoal writes is JSON: this file was changed by something else, and counting on it would skip products.
      throw new ShoalError(
        ErrorCode.INVALID_INPUT,
        `--resume: the last line of ${partial} is not JSON (${JSON.stringify(last.slice(0, 80))}), so it was not written by shoal; remove that line, or the file to start over`,
      );
    }
    return { lines, lastId: idOf(last) };
  } finally {
    await handle.close();
  }
}

/** Writes `FILE.partial`, renamed to FILE on success. */
class FileLineOutput implements LineOutput {
  readonly name: string;
  readonly resumed: ResumePoint | null;
  readonly #partial: string;
  readonly #stream: WriteStream;
  #count = 0;
  #failure: unknown = null;

  private constructor(path: string, partial: string, stream: WriteStream, resumed: ResumePoint | null) {
    this.name = path;
    this.#partial = partial;
    this.#stream = stream;
    this.resumed = resumed;
    this.#count = resumed?.lines ?? 0;
    stream.on('error', (error) => {
      this.#failure = new ShoalError(ErrorCode.INVALID_INPUT, `cannot write --out ${path}: ${describeFsError(error)}`, { cause: error });
    });
  }

  static async open(path: string, options: LineOutputOptions): Promise<FileLineOutput> {
    const partial = `${path}.partial`;
    let resumed: ResumePoint | null = null;
    if (options.resume === true) {
      try {
        resumed = await resumePoint(partial);
      } catch (error) {
        if (!(error instanceof Error && 'code' in error && error.code === 'ENOENT')) {
          throw new ShoalError(ErrorCode.INVALID_INPUT, `--resume: cannot read ${partial}: ${describeFsError(error)}`, { cause: error });
        }
        // Nothing to resume: start from the first line.
      }
    }
    let handle;
    try {
      // 'wx': never overwrite the finished lines of an interrupted run without being asked to.
      handle = await open(partial, resumed === null ? 'wx' : 'a');
    } catch (error) {
      if (error instanceof Error && 'code' in error && error.code === 'EEXIST') {
        throw new ShoalError(
          ErrorCode.INVALID_INPUT,
          `${partial} exists (the output of an interrupted or failed run): pass --resume to continue after its last complete line, or delete it to start over`,
          { cause: error },
        );
      }
      throw new ShoalError(ErrorCode.INVALID_INPUT, `cannot write --out ${path}: ${describeFsError(error)}`, { cause: error });
    }
    return new FileLineOutput(path, partial, createWriteStream(partial, { fd: handle }), resumed);
  }

  get linesWritten(): number {
    return this.#count;
  }

  async write(lines: readonly string[]): Promise<void> {
    this.#count += await writeLines(this.#stream, lines, () => this.#failure);
  }

  async #close(): Promise<void> {
    if (this.#stream.closed) return;
    this.#stream.end();
    try {
      await once(this.#stream, 'close');
    } catch {
      // The 'error' listener has recorded the failure.
    }
  }

  async finish(): Promise<void> {
    await this.#close();
    if (this.#failure !== null) throw this.#failure;
    await rename(this.#partial, this.name);
  }

  async abort(): Promise<string | null> {
    await this.#close();
    if (this.#count === 0) {
      await rm(this.#partial, { force: true });
      return null;
    }
    return this.#partial;
  }
}

/**
 * stdout when `path` is absent or "-". A path that exists and is not a regular file (/dev/stdout,
 * a named pipe) is written directly: it cannot be replaced by a rename, nor resumed.
 */
export async function openLineOutput(path: string | undefined, stdout: Writable, options: LineOutputOptions = {}): Promise<LineOutput> {
  if (path === undefined || path === '-') {
    if (options.resume === true) throw new ShoalError(ErrorCode.INVALID_INPUT, '--resume continues the FILE.partial of an --out FILE: name the file with --out');
    return new StreamLineOutput('stdout', stdout, false);
  }
  let special = false;
  try {
    const info = await stat(path);
    if (info.isDirectory()) throw new ShoalError(ErrorCode.INVALID_INPUT, `--out ${path} is a folder; name a file`);
    special = !info.isFile();
  } catch (error) {
    if (error instanceof ShoalError) throw error;
    // Does not exist yet: the normal case.
  }
  try {
    await stat(dirname(path));
  } catch (error) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `cannot write --out ${path}: folder ${dirname(path)} does not exist`, { cause: error });
  }
  if (special) {
    if (options.resume === true) throw new ShoalError(ErrorCode.INVALID_INPUT, `--resume: ${path} is not a regular file`);
    return new StreamLineOutput(path, createWriteStream(path, { flags: 'a' }), true);
  }
  return FileLineOutput.open(path, options);
}
