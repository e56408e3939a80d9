import { once } from 'node:events';
import { createWriteStream, fstat, type Stats, type WriteStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { RejectedRecord } from '../../pipelines/documents/sources.js';
import { describeFsError } from './line-output.js';

/**
 * `shoal ingest --on-error skip`: each refused stdin line as one JSON line
 * `{"line","code","reason","input","truncated"}` in `--rejects FILE` (default
 * ./shoal-rejects.jsonl). The file is created, replacing an older one, only when a line is
 * refused: a run without rejects leaves no file and touches none.
 */

export const DEFAULT_REJECTS_FILE = 'shoal-rejects.jsonl';

export class RejectsFile {
  readonly path: string;
  #stream: WriteStream | null = null;
  #failure: ShoalError | null = null;
  #count = 0;

  constructor(path: string) {
    this.path = path;
  }

  /**
   * The rejects file for a run reading records from `stdinFd` (null: stdin is not a descriptor of
   * this process, as in tests). Refused when it is the very file on
   * stdin (`< shoal-rejects.jsonl`, piping the last run's rejects back in): created with 'w', it
   * truncated the input while the input was still being read, and the lines not yet read were lost.
   */
  static async forInput(path: string, stdinFd: number | null): Promise<RejectsFile> {
    if (stdinFd === null) return new RejectsFile(path);
    const [input, target] = await Promise.all([fstatOf(stdinFd), stat(path).catch(() => null)]);
    if (input !== null && target !== null && input.isFile() && input.dev === target.dev && input.ino === target.ino) {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `--rejects ${path} is the file being read on stdin: writing the rejected lines there would overwrite the input before it is read; name another file (e.g. --rejects rejects-2.jsonl)`);
    }
    return new RejectsFile(path);
  }

  get count(): number {
    return this.#count;
  }

  /** Writes one rejected line, waiting for the disk when the stream is full. */
  readonly add = async (rejected: RejectedRecord): Promise<void> => {
    if (this.#stream === null) {
      const stream = createWriteStream(this.path, { flags: 'w' });
      stream.on('error', (error) => {
        this.#failure = new ShoalError(ErrorCode.INVALID_INPUT, `cannot write --rejects ${this.path}: ${describeFsError(error)}`, { cause: error });
      });
      this.#stream = stream;
    }
    if (this.#failure !== null) throw this.#failure;
    this.#count += 1;
    if (!this.#stream.write(`${JSON.stringify(rejected)}\n`)) {
      await Promise.race([once(this.#stream, 'drain'), once(this.#stream, 'error')]).catch((error: unknown) => {
        this.#failure ??= new ShoalError(ErrorCode.INVALID_INPUT, `cannot write --rejects ${this.path}: ${describeFsError(error)}`, { cause: error });
      });
    }
    if (this.#failure !== null) throw this.#failure;
  };

  /** Flushes and closes the file (nothing when no line was refused); a write failure is thrown here. */
  async close(): Promise<void> {
    const stream = this.#stream;
    if (stream === null) return;
    if (!stream.closed) {
      stream.end();
      await once(stream, 'close').catch((error: unknown) => {
        this.#failure ??= new ShoalError(ErrorCode.INVALID_INPUT, `cannot write --rejects ${this.path}: ${describeFsError(error)}`, { cause: error });
      });
    }
    if (this.#failure !== null) throw this.#failure;
  }
}

function fstatOf(fd: number): Promise<Stats | null> {
  return new Promise((resolve) => fstat(fd, (error, stats) => resolve(error === null ? stats : null)));
}
