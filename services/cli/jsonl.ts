import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { describeFsError } from './line-output.js';

// The output side lives in line-output.ts; re-exported for the modules that read and write lines.
export { isBrokenPipe, openLineOutput, type LineOutput } from './line-output.js';

/**
 * JSON Lines in and out, streaming. Input is split on raw bytes (a UTF-8 newline byte never occurs
 * inside a multi-byte character), so every line knows its exact byte offset for the progress bar
 * and memory stays bounded by one chunk of lines however large the file. Output: line-output.ts.
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

