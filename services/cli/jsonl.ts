import { once } from 'node:events';
import { createReadStream, createWriteStream, type WriteStream } from 'node:fs';
import { rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';

/**
 * JSON Lines in and out, streaming. Input is split on raw bytes (a UTF-8 newline byte never occurs
 * inside a multi-byte character), so every line knows its exact byte offset for the progress bar
 * and memory stays bounded by one chunk of lines however large the file. Output goes to stdout, or
 * to a temporary file renamed into place on success, so a failed run never leaves a file that
 * looks complete.
 */

/** Longest accepted input line. A score line may carry many long items; beyond this it is a mistake. */
export const MAX_LINE_BYTES = 256 * 1024 * 1024;

export interface RawLine {
  /** 1-based line number in the input. */
  number: number;
  text: string;
  /** Byte offset just past this line's newline. */
  endOffset: number;
}

export interface LineSource {
  /** For messages: the file path, or "stdin". */
  readonly name: string;
  readonly stream: Readable;
  /** File size in bytes; null for stdin or pipes. */
  readonly totalBytes: number | null;
}

export async function openSource(path: string | undefined, stdin: Readable): Promise<LineSource> {
  if (path === undefined || path === '-') return { name: 'stdin', stream: stdin, totalBytes: null };
  let size: number | null = null;
  try {
    const info = await stat(path);
    if (info.isDirectory()) throw new ShoalError(ErrorCode.INVALID_INPUT, `--input ${path} is a folder; name a JSON Lines file`);
    size = info.isFile() ? info.size : null;
  } catch (error) {
    if (error instanceof ShoalError) throw error;
    throw new ShoalError(ErrorCode.INVALID_INPUT, `cannot read --input ${path}: ${describeFsError(error)}`, { cause: error });
  }
  const stream = createReadStream(path, { highWaterMark: 1024 * 1024 });
  return { name: path, stream, totalBytes: size };
}

function describeFsError(error: unknown): string {
  if (error instanceof Error && 'code' in error && typeof error.code === 'string') {
    if (error.code === 'ENOENT') return 'no such file';
    if (error.code === 'EACCES') return 'permission denied';
  }
  return error instanceof Error ? error.message : String(error);
}

const decoder = new TextDecoder('utf-8', { fatal: true });

function decodeLine(bytes: Uint8Array, number: number, source: string): string {
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch (error) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `${source} line ${number}: not valid UTF-8`, { cause: error, details: { line: number } });
  }
  if (number === 1 && text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  return text.endsWith('\r') ? text.slice(0, -1) : text;
}

function tooLong(number: number, source: string): ShoalError {
  return new ShoalError(
    ErrorCode.INPUT_TOO_LARGE,
    `${source} line ${number} is longer than ${MAX_LINE_BYTES} bytes; is the input really JSON Lines (one object per line)?`,
    { details: { line: number } },
  );
}

/**
 * Yields the input's lines in groups of up to `size` (fewer when the input pauses). When a line cannot be read (too long, bad
 * UTF-8), the lines before it are yielded first and the error is thrown on the next step.
 */
export async function* readLineChunks(source: LineSource, size: number): AsyncGenerator<RawLine[]> {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let offset = 0;
  let number = 0;
  let chunk: RawLine[] = [];
  const take = (bytes: Uint8Array): void => {
    number += 1;
    offset += bytes.length + 1;
    chunk.push({ number, text: decodeLine(bytes, number, source.name), endOffset: offset });
  };
  try {
    for await (const data of source.stream) {
      const buffer = typeof data === 'string' ? Buffer.from(data) : Buffer.isBuffer(data) ? data : Buffer.from(String(data));
      let start = 0;
      for (let newline = buffer.indexOf(10, start); newline !== -1; newline = buffer.indexOf(10, start)) {
        const tail = buffer.subarray(start, newline);
        if (pendingBytes + tail.length > MAX_LINE_BYTES) throw tooLong(number + 1, source.name);
        take(pending.length === 0 ? tail : Buffer.concat([...pending, tail]));
        pending = [];
        pendingBytes = 0;
        start = newline + 1;
        if (chunk.length >= size) {
          yield chunk;
          chunk = [];
        }
      }
      if (start < buffer.length) {
        pending.push(buffer.subarray(start));
        pendingBytes += buffer.length - start;
        if (pendingBytes > MAX_LINE_BYTES) throw tooLong(number + 1, source.name);
      }
      // Hand over what has arrived instead of waiting for a full chunk: a slow producer (a pipe
      // fed line by line) gets its results promptly. A busy consumer still sees big reads,
      // because a stream returns everything buffered meanwhile in one piece.
      if (chunk.length > 0) {
        yield chunk;
        chunk = [];
      }
    }
    // A last line without a trailing newline still counts.
    if (pendingBytes > 0) {
      take(Buffer.concat(pending));
      offset -= 1;
      const last = chunk[chunk.length - 1];
      if (last !== undefined) last.endOffset = offset;
    }
  } catch (error) {
    if (chunk.length > 0) yield chunk;
    throw error;
  }
  if (chunk.length > 0) yield chunk;
}

/** Where result lines go. `write` respects backpressure; `finish` makes the output final. */
export interface LineSink {
  readonly name: string;
  readonly linesWritten: number;
  write(lines: readonly string[]): Promise<void>;
  finish(): Promise<void>;
  /** After a failure: keeps what was written as `<file>.partial` and returns that path, or null. */
  abort(): Promise<string | null>;
}

/** Thrown when the reader of stdout went away (`shoal ... | head`): not a failure of shoal. */
export function isBrokenPipe(error: unknown): boolean {
  return error instanceof ShoalError && error.code === ErrorCode.CANCELLED && error.details?.reason === 'broken-pipe';
}

async function writeAll(stream: Writable, text: string): Promise<void> {
  if (!stream.write(text)) await once(stream, 'drain');
}

class StreamSink implements LineSink {
  readonly name: string;
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
    if (this.#failure !== null) throw this.#failure;
    if (lines.length === 0) return;
    try {
      await writeAll(this.#stream, `${lines.join('\n')}\n`);
    } catch (error) {
      throw this.#failure ?? error;
    }
    if (this.#failure !== null) throw this.#failure;
    this.#count += lines.length;
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

/** Writes `<dir>/.<name>.<pid>.tmp`, renamed to the target on success. */
class FileSink implements LineSink {
  readonly name: string;
  readonly #temp: string;
  readonly #stream: WriteStream;
  #count = 0;
  #failure: unknown = null;

  constructor(path: string) {
    this.name = path;
    this.#temp = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
    this.#stream = createWriteStream(this.#temp);
    this.#stream.on('error', (error) => {
      this.#failure = new ShoalError(ErrorCode.INVALID_INPUT, `cannot write --output ${path}: ${describeFsError(error)}`, { cause: error });
    });
  }

  get linesWritten(): number {
    return this.#count;
  }

  async write(lines: readonly string[]): Promise<void> {
    if (this.#failure !== null) throw this.#failure;
    if (lines.length === 0) return;
    try {
      await writeAll(this.#stream, `${lines.join('\n')}\n`);
    } catch (error) {
      throw this.#failure ?? error;
    }
    this.#count += lines.length;
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
    await rename(this.#temp, this.name);
  }

  async abort(): Promise<string | null> {
    await this.#close();
    if (this.#count === 0 || this.#failure !== null) {
      await rm(this.#temp, { force: true });
      return null;
    }
    const partial = `${this.name}.partial`;
    await rename(this.#temp, partial);
    return partial;
  }
}

/**
 * stdout when `path` is absent or "-". A path that exists and is not a regular file (/dev/stdout,
 * a named pipe) is written directly: it cannot be replaced by a rename.
 */
export async function openSink(path: string | undefined, stdout: Writable): Promise<LineSink> {
  if (path === undefined || path === '-') return new StreamSink('stdout', stdout, false);
  let special = false;
  try {
    const info = await stat(path);
    if (info.isDirectory()) throw new ShoalError(ErrorCode.INVALID_INPUT, `--output ${path} is a folder; name a file`);
    special = !info.isFile();
  } catch (error) {
    if (error instanceof ShoalError) throw error;
    // Does not exist yet: the normal case.
  }
  try {
    await stat(dirname(path));
  } catch (error) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `cannot write --output ${path}: folder ${dirname(path)} does not exist`, { cause: error });
  }
  return special ? new StreamSink(path, createWriteStream(path, { flags: 'a' }), true) : new FileSink(path);
}
