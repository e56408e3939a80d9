import { setMaxListeners } from 'node:events';
import type { z } from 'zod';
import { ErrorCode, isShoalError, ShoalError } from '../../adapters/protocol/errors.js';
import { itemMessage } from '../../adapters/protocol/item-errors.js';
import type { ItemId } from '../../adapters/protocol/requests.js';
import { describeIssues } from '../../adapters/protocol/validate.js';
import { readLineChunks, type LineOutput, type LineSource, type RawLine } from './jsonl.js';
import type { ResumePoint } from './line-output.js';

/**
 * The streaming loop every line command shares: read a chunk of lines, validate each, hand the
 * chunk to the engine, write the results in input order. Chunks are prepared while the ones
 * before them run (at most three in flight), so memory stays bounded by three chunks whatever
 * the input size. An invalid line stops the run after every line before it has been written.
 */

export interface NumberedLine<T> {
  /** 1-based line number in the input. */
  line: number;
  /** The line's own `id`, or its line number when it has none. */
  id: ItemId;
  value: T;
}

export interface LineJob<T extends { id?: ItemId | undefined }> {
  /** What one line must look like once JSON-parsed. */
  schema: z.ZodType<T>;
  /** One JSON-safe result per line, in the same order; each must carry the line's `id`. */
  run(lines: NumberedLine<T>[], signal: AbortSignal): Promise<object[]>;
  /** Renames fields of each parsed line before `schema` (--id-field, --text-field, --template: line-fields.ts). */
  prepare?: LinePrepare;
  /**
   * `run` sends the lines as the items of one request, in order (encode, extract): a failure that
   * names an item (`details.item`: an image that does not decode) is that line's, so the lines
   * before it are still written and the error names the line.
   */
  itemPerLine?: boolean;
}

/** Rewrites a parsed JSON line (its 1-based number given); throws INVALID_INPUT to reject it. */
export type LinePrepare = (line: Record<string, unknown>, number: number) => Record<string, unknown>;

export interface StreamOptions {
  chunkLines: number;
  signal: AbortSignal;
  /** After each written chunk: input bytes and lines fully processed. */
  onProgress?: (bytes: number, lines: number) => void;
  /** --resume: this many non-blank input lines already have their results in the output; skip them. */
  resume?: ResumePoint | null;
}

export interface StreamSummary {
  lines: number;
}

/**
 * At most this many chunks are with the engine at once. With two, the model thread sat idle
 * 80-140 ms at every chunk boundary (the next chunk was tokenized only once the oldest was
 * written); a third keeps a tokenized chunk queued behind the running ones.
 */
const CHUNKS_IN_FLIGHT = 3;

function lineError(source: string, line: number, message: string, cause?: unknown): ShoalError {
  return new ShoalError(ErrorCode.INVALID_INPUT, `${source} line ${line}: ${message}`, { cause, details: { line } });
}

/** Parses one non-blank line; throws INVALID_INPUT naming the line. */
export function parseLine<T extends { id?: ItemId | undefined }>(raw: RawLine, schema: z.ZodType<T>, source: string, prepare?: LinePrepare): NumberedLine<T> {
  let data: unknown;
  try {
    data = JSON.parse(raw.text);
  } catch (error) {
    throw lineError(source, raw.number, `not valid JSON (${error instanceof Error ? error.message : String(error)})`, error);
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    throw lineError(source, raw.number, 'expected a JSON object like {"id": ..., "text": ...}');
  }
  if (prepare !== undefined) {
    try {
      data = prepare({ ...data }, raw.number);
    } catch (error) {
      throw lineError(source, raw.number, error instanceof Error ? error.message : String(error), error);
    }
  }
  const result = schema.safeParse(data);
  if (!result.success) throw lineError(source, raw.number, describeIssues(result.error.issues));
  return { line: raw.number, id: result.data.id ?? raw.number, value: result.data };
}

/**
 * A signal for one chunk's engine calls that follows the run's signal. Whatever listeners the
 * engine adds to it (one per request) become garbage with the chunk, instead of piling up on the
 * long-lived run signal for the whole input.
 */
function chunkSignal(run: AbortSignal): { signal: AbortSignal; release: () => void } {
  const controller = new AbortController();
  // A score chunk makes one engine call per line, each listening: not a leak, no warning wanted.
  setMaxListeners(0, controller.signal);
  const follow = (): void => controller.abort(run.reason);
  if (run.aborted) follow();
  else run.addEventListener('abort', follow, { once: true });
  return { signal: controller.signal, release: () => run.removeEventListener('abort', follow) };
}

/**
 * Skips the lines an earlier run finished (--resume), checking at the last of them that the
 * partial output's last id is that line's id: a FILE.partial of another input is refused instead
 * of being continued into a mix.
 */
class ResumeSkip<T extends { id?: ItemId | undefined }> {
  #skipped = 0;
  constructor(
    private readonly point: ResumePoint | null | undefined,
    private readonly job: LineJob<T>,
    private readonly source: string,
  ) {}

  /** Whether this non-blank line was done by the earlier run. */
  skip(raw: RawLine): boolean {
    const point = this.point;
    if (point === null || point === undefined || this.#skipped >= point.lines) return false;
    this.#skipped++;
    if (this.#skipped === point.lines && point.lastId !== null) {
      const { id } = parseLine(raw, this.job.schema, this.source, this.job.prepare);
      if (id !== point.lastId) {
        throw new ShoalError(
          ErrorCode.INVALID_INPUT,
          `--resume: the partial output ends with id ${JSON.stringify(point.lastId)} but line ${raw.number} of ${this.source} has id ${JSON.stringify(id)}; it is not this input's output (delete it to start over)`,
          { details: { reason: 'resume-mismatch' } },
        );
      }
    }
    return true;
  }

  /** After the input: the partial output must not hold more lines than the input has. */
  checkComplete(): void {
    const total = this.point?.lines ?? 0;
    if (this.#skipped < total) {
      throw new ShoalError(
        ErrorCode.INVALID_INPUT,
        `--resume: the partial output has ${total} lines but ${this.source} has only ${this.#skipped}; it is not this input's output (delete it to start over)`,
        { details: { reason: 'resume-mismatch' } },
      );
    }
  }
}

function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new ShoalError(ErrorCode.CANCELLED, 'interrupted');
}

interface InFlight<T> {
  results: Promise<object[]>;
  lines: NumberedLine<T>[];
  endOffset: number;
}

/** The line of a chunk a failure names through its item (itemPerLine jobs), or null. */
function failedLine<T>(error: unknown, lines: readonly NumberedLine<T>[]): { index: number; line: NumberedLine<T>; error: ShoalError } | null {
  if (!isShoalError(error)) return null;
  const item = error.details?.item;
  if (typeof item !== 'number' || !Number.isInteger(item)) return null;
  const line = lines[item];
  return line === undefined ? null : { index: item, line, error };
}

export async function streamLines<T extends { id?: ItemId | undefined }>(
  source: LineSource,
  sink: LineOutput,
  job: LineJob<T>,
  options: StreamOptions,
): Promise<StreamSummary> {
  const inFlight: InFlight<T>[] = [];
  let done = 0;
  const write = async (results: readonly object[], expected: number): Promise<void> => {
    if (results.length !== expected) {
      throw new ShoalError(ErrorCode.INTERNAL, `the engine returned ${results.length} results for ${expected} lines`);
    }
    await sink.write(results.map((result) => JSON.stringify(result)));
    done += results.length;
  };
  const flushOne = async (): Promise<void> => {
    const next = inFlight.shift();
    if (next === undefined) return;
    let results: object[];
    try {
      results = await next.results;
    } catch (error) {
      const failed = job.itemPerLine === true ? failedLine(error, next.lines) : null;
      if (failed === null) throw error;
      // The lines before the failing one are fine: they are run again and written, as a line
      // refused when read would leave them; the error names the input line, not the item.
      const before = next.lines.slice(0, failed.index);
      if (before.length > 0) {
        const scope = chunkSignal(options.signal);
        await write(await job.run(before, scope.signal).finally(scope.release), before.length);
      }
      throw new ShoalError(failed.error.code, `${source.name} line ${failed.line.line}: ${itemMessage(failed.error.message)}`, { cause: error, details: { ...failed.error.details, line: failed.line.line } });
    }
    await write(results, next.lines.length);
    options.onProgress?.(next.endOffset, done);
  };

  let stop: unknown = null;
  const resume = new ResumeSkip(options.resume, job, source.name);
  const chunks = readLineChunks(source, options.chunkLines);
  try {
    for (;;) {
      let next: IteratorResult<RawLine[]>;
      try {
        next = await chunks.next();
      } catch (error) {
        // A read error (line too long, bad UTF-8): the lines before it still get written.
        stop = error;
        break;
      }
      if (next.done === true) break;
      throwIfAborted(options.signal);
      const raw = next.value;
      const parsed: NumberedLine<T>[] = [];
      let endOffset = 0;
      for (const line of raw) {
        try {
          if (line.text.trim() !== '' && !resume.skip(line)) parsed.push(parseLine(line, job.schema, source.name, job.prepare));
        } catch (error) {
          stop = error;
          break;
        }
        endOffset = line.endOffset;
      }
      if (parsed.length > 0) {
        const scope = chunkSignal(options.signal);
        const results = job.run(parsed, scope.signal).finally(scope.release);
        // Awaited in order by flushOne; this only keeps a rejection from being reported as unhandled meanwhile.
        results.catch(() => undefined);
        inFlight.push({ results, lines: parsed, endOffset });
      }
      if (stop !== null) break;
      // An engine failure here propagates at once: later chunks must not be written after a gap.
      while (inFlight.length >= CHUNKS_IN_FLIGHT) await flushOne();
    }
  } finally {
    await chunks.return(undefined);
  }
  while (inFlight.length > 0) await flushOne();
  if (stop !== null) throw stop;
  throwIfAborted(options.signal);
  resume.checkComplete();
  return { lines: done };
}
