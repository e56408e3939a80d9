import { once } from 'node:events';
import { createWriteStream, type WriteStream } from 'node:fs';
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
