import type { Readable, Writable } from 'node:stream';
import type { Command } from 'commander';
import { z } from 'zod';
import { ErrorCode, ShoalError, toShoalError } from '../../adapters/protocol/errors.js';
import type { ItemId } from '../../adapters/protocol/requests.js';
import { parseWith } from '../../adapters/protocol/validate.js';
import { missingModelDirs } from '../../adapters/sources/model-dirs.js';
import { loadCatalog, type Catalog } from '../../pipelines/inference/catalog.js';
import { InferenceEngine, type EngineOptionsInput } from '../../pipelines/inference/engine.js';
import { engineOptionsFromSettings } from '../settings/engine-settings.js';
import { ShoalSettings } from '../settings/shoal-settings.js';
import { resolveCliConfig, type CliConfig } from './config.js';
import { openLineOutput, openSource } from './jsonl.js';
import { lineFieldMapper, type LineFieldOptions } from './line-fields.js';
import { streamLines, type LineJob, type LinePrepare } from './line-stream.js';
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
  /** The process's settings, built once in main.ts from `env` (and the settings file). @default built from `env` */
  settings?: ShoalSettings;
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

/** What a finished line run did, for a command's closing summary. */
export interface RunSummary {
  /** Lines this run wrote (not counting --resume's earlier ones). */
  lines: number;
  /** Lines an earlier run had written (--resume). */
  resumed: number;
  seconds: number;
  /** Where the summary line goes (stderr, silent with --quiet). */
  progress: StderrProgress;
}

/** Where a line command reads and writes (already validated by the command). */
export interface LineIo {
  input?: string | undefined;
  output?: string | undefined;
  /** --resume: continue the output's FILE.partial after its last complete line. */
  resume?: boolean | undefined;
}

export class CliApp {
  readonly io: CliIo;
  /** Every setting this invocation reads, resolved once (services/settings/shoal-settings.ts). */
  readonly settings: ShoalSettings;
  #modelDirsChecked = false;

  constructor(io: CliIo) {
    this.io = io;
    this.settings = io.settings ?? ShoalSettings.of(io.env);
  }

  /** The frozen configuration for this invocation: global flags over SHOAL_* variables over defaults. */
  config(command: Command): CliConfig {
    const flags = parseWith(GlobalFlagValues, command.optsWithGlobals(), 'global options', ErrorCode.CONFIG_INVALID);
    return resolveCliConfig(flags, this.settings);
  }

  /** The field mapping of --id-field / --text-field / --template; its one-time hint goes to stderr unless --quiet. */
  lineFields(command: Command, options: LineFieldOptions): LinePrepare {
    const quiet = this.config(command).quiet;
    return lineFieldMapper(options, (message) => {
      if (!quiet) this.io.stderr.write(`warning: ${message}\n`);
    });
  }

  progress(config: CliConfig): StderrProgress {
    return new StderrProgress({ mode: config.progress, quiet: config.quiet, stream: this.io.stderr });
  }

  /** Warns (once) about models directories that do not exist: a typo in SHOAL_MODEL_DIR otherwise shows up as a hub download of every model. */
  async warnMissingModelDirs(config: CliConfig): Promise<void> {
    if (this.#modelDirsChecked || config.quiet) return;
    this.#modelDirsChecked = true;
    for (const dir of await missingModelDirs(config.engine.modelDirs)) {
      this.io.stderr.write(`warning: models directory ${dir} (SHOAL_MODEL_DIR / --model-dir) does not exist\n`);
    }
  }

  /** Runs `body` with an engine configured from `config` (plus a command's `extra` options); the engine is closed whatever happens. */
  async withEngine<T>(config: CliConfig, progress: StderrProgress, body: (engine: InferenceEngine) => Promise<T>, extra: EngineExtras = {}): Promise<T> {
    await this.warnMissingModelDirs(config);
    const configured = config.engine.catalog === null ? undefined : await loadCatalog(config.engine.catalog);
    const catalog = extra.catalog === undefined ? configured : extra.catalog(configured);
    const base = engineOptionsFromSettings(config.engine, this.settings);
    const engine = new InferenceEngine({
      ...base,
      // A command's own image flags add to the roots and hosts the environment allows.
      images: {
        ...extra.images,
        roots: [...(base.images?.roots ?? []), ...(extra.images?.roots ?? [])],
        allowedHosts: [...(base.images?.allowedHosts ?? []), ...(extra.images?.allowedHosts ?? [])],
      },
      // One process, one job, then exit: the arena's memory goes back at exit, and without it each
      // large batch maps fresh pages (engine-settings.ts cpuArena). SHOAL_CPU_ARENA=0 turns it off.
      runtime: { ...base.runtime, cpuMemArena: config.engine.cpuArena ?? true },
      // No spare model thread: the command's first load starts its own thread at once, and a spare
      // started after it (the pool keeps one ready) would import onnxruntime on a core the run needs.
      spareThreads: 0,
      ...(catalog === undefined ? {} : { catalog }),
      onDownloadProgress: progress.download,
      // One command, one caller: no query traffic to keep a second session (at nice 0) for, so the
      // one session runs at the process's own priority instead of the bulk lane's nice value,
      // which on a busy machine hands its CPU to every other process (bench/throughput.ts).
      interactiveSessions: false,
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
  ): Promise<RunSummary> {
    const config = this.config(command);
    const started = performance.now();
    const source = await openSource(io.input, this.io.stdin);
    if (source.name === 'stdin' && this.io.stdin.isTTY === true && !config.quiet) {
      this.io.stderr.write(`reading JSON Lines from the terminal (end with Ctrl-D; see shoal ${command.name()} --help)\n`);
    }
    const sink = await openLineOutput(io.output, this.io.stdout, { resume: io.resume === true });
    const progress = this.progress(config);
    // An interrupt must also end a read that is waiting for more input (a slow or idle pipe).
    const stopReading = (): void => {
      source.stream.destroy(new ShoalError(ErrorCode.CANCELLED, 'interrupted'));
    };
    this.io.signal.addEventListener('abort', stopReading, { once: true });
    try {
      const streamed = await this.withEngine(config, progress, async (engine) => {
        const bar = progress.input(source.name, source.totalBytes);
        return streamLines(source, sink, makeJob(engine), {
          chunkLines: config.chunkLines,
          signal: this.io.signal,
          onProgress: (bytes, lines) => bar.update(bytes, lines),
          resume: sink.resumed,
        });
      }, extra);
      progress.stop();
      await sink.finish();
      return { lines: streamed.lines, resumed: sink.resumed?.lines ?? 0, seconds: (performance.now() - started) / 1000, progress };
    } catch (error) {
      progress.stop();
      const partial = await sink.abort();
      const shoal = toShoalError(error);
      // A partial output that does not belong to this input is left alone and not offered for --resume.
      if (partial === null || shoal.details?.reason === 'resume-mismatch') throw error;
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
