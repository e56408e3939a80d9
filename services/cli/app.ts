import type { Readable, Writable } from 'node:stream';
import type { Command } from 'commander';
import { z } from 'zod';
import { ErrorCode, ShoalError, toShoalError } from '../../adapters/protocol/errors.js';
import type { ItemId } from '../../adapters/protocol/requests.js';
import { parseWith } from '../../adapters/protocol/validate.js';
import { loadCatalog, type Catalog } from '../../pipelines/inference/catalog.js';
import { InferenceEngine, type EngineOptionsInput } from '../../pipelines/inference/engine.js';
import { engineOptionsFromSettings } from '../settings/engine-settings.js';
import { resolveCliConfig, type CliConfig } from './config.js';
import { openSink, openSource } from './jsonl.js';
import { streamLines, type LineJob } from './line-stream.js';
import { StderrProgress } from './progress.js';

/**
 * What every command needs from the process, in one object: the standard streams, the
 * environment, the interrupt signal, the resolved configuration and an engine built from it.
 * Commands never touch `process` themselves, which keeps them testable and the exits in main.ts.
 */

export interface CliIo {
  stdin: Readable & { isTTY?: boolean };
  stdout: Writable;
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
  /** Aborted on SIGINT/SIGTERM: the line loop stops and the engine drops queued work. */
  signal: AbortSignal;
}

/** The global flags as commander collects them; other keys (the command's own) are ignored here. */
const GlobalFlagValues = z.object({
  catalog: z.string().optional(),
  modelDir: z.string().optional(),
  threads: z.string().optional(),
  providers: z.string().optional(),
  batchTokens: z.string().optional(),
  memoryBudget: z.string().optional(),
  chunkLines: z.string().optional(),
  progress: z.boolean().optional(),
  quiet: z.boolean().optional(),
});

/** Engine options a command sets from its own flags: image sources (encode/extract), or a catalog of its own made from the configured one. */
export type EngineExtras = Pick<EngineOptionsInput, 'images'> & { catalog?: (configured: Catalog | undefined) => Catalog };

/** Where a line command reads and writes (already validated by the command). */
export interface LineIo {
  input?: string | undefined;
  output?: string | undefined;
}

export class CliApp {
  readonly io: CliIo;

  constructor(io: CliIo) {
    this.io = io;
  }

  /** The frozen configuration for this invocation: global flags over SHOAL_* variables over defaults. */
  config(command: Command): CliConfig {
    const flags = parseWith(GlobalFlagValues, command.optsWithGlobals(), 'global options', ErrorCode.CONFIG_INVALID);
    return resolveCliConfig(flags, this.io.env);
  }

  progress(config: CliConfig): StderrProgress {
    return new StderrProgress({ mode: config.progress, quiet: config.quiet, stream: this.io.stderr });
  }

  /** Runs `body` with an engine configured from `config` (plus a command's `extra` options); the engine is closed whatever happens. */
  async withEngine<T>(config: CliConfig, progress: StderrProgress, body: (engine: InferenceEngine) => Promise<T>, extra: EngineExtras = {}): Promise<T> {
    const configured = config.engine.catalog === null ? undefined : await loadCatalog(config.engine.catalog);
    const catalog = extra.catalog === undefined ? configured : extra.catalog(configured);
    const base = engineOptionsFromSettings(config.engine, this.io.env);
    const engine = new InferenceEngine({
      ...base,
      // A command's own image flags add to the roots and hosts the environment allows.
      images: {
        ...extra.images,
        roots: [...(base.images?.roots ?? []), ...(extra.images?.roots ?? [])],
        allowedHosts: [...(base.images?.allowedHosts ?? []), ...(extra.images?.allowedHosts ?? [])],
      },
      ...(catalog === undefined ? {} : { catalog }),
      onDownloadProgress: progress.download,
    });
    try {
      return await body(engine);
    } finally {
      await engine.close();
    }
  }

  /** Streams JSON Lines from the input through `makeJob(engine)` to the output. */
  async runLines<T extends { id?: ItemId | undefined }>(
    command: Command,
    io: LineIo,
    makeJob: (engine: InferenceEngine) => LineJob<T>,
    extra: EngineExtras = {},
  ): Promise<void> {
    const config = this.config(command);
    const source = await openSource(io.input, this.io.stdin);
    if (source.name === 'stdin' && this.io.stdin.isTTY === true && !config.quiet) {
      this.io.stderr.write(`reading JSON Lines from the terminal (end with Ctrl-D; see shoal ${command.name()} --help)\n`);
    }
    const sink = await openSink(io.output, this.io.stdout);
    const progress = this.progress(config);
    // An interrupt must also end a read that is waiting for more input (a slow or idle pipe).
    const stopReading = (): void => {
      source.stream.destroy(new ShoalError(ErrorCode.CANCELLED, 'interrupted'));
    };
    this.io.signal.addEventListener('abort', stopReading, { once: true });
    try {
      await this.withEngine(config, progress, async (engine) => {
        const bar = progress.input(source.name, source.totalBytes);
        await streamLines(source, sink, makeJob(engine), {
          chunkLines: config.chunkLines,
          signal: this.io.signal,
          onProgress: (bytes, lines) => bar.update(bytes, lines),
        });
      }, extra);
      progress.stop();
      await sink.finish();
    } catch (error) {
      progress.stop();
      const partial = await sink.abort();
      if (partial === null) throw error;
      const shoal = toShoalError(error);
      throw new ShoalError(shoal.code, shoal.message, {
        cause: shoal.cause,
        details: { ...shoal.details, partialOutput: partial, linesWritten: sink.linesWritten },
      });
    } finally {
      this.io.signal.removeEventListener('abort', stopReading);
      if (source.name !== 'stdin') source.stream.destroy();
    }
  }
}
