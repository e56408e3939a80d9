import { ShoalSettings } from '../settings/shoal-settings.js';
import { CommanderError } from 'commander';
import { ErrorCode, ShoalError, toShoalError } from '../../adapters/protocol/errors.js';
import { settleEarlyThreads } from '../../adapters/model-threads/early-threads.js';
import { prepareOrtEnvironment } from '../../adapters/runtime/ort-environment.js';
import { envValue, SETTINGS } from '../settings/table.js';
import { CliApp } from './app.js';
import { ExitCode, exitCodeFor, formatError, partialOutputNote } from './exit.js';
import { isBrokenPipe } from './jsonl.js';
import { buildProgram, commandWord } from './program.js';

/**
 * Composition root of the `shoal` command (started by bin/shoal.js). Owns the process: signals
 * (first SIGINT/SIGTERM stops intake and closes the engine; a second one, a moment later, exits
 * at once), the mapping of errors to exit codes, and the final exit, which is explicit because an
 * unfinished stdin must not keep a failed run alive.
 */

/** Signals within this window count as one (a terminal's Ctrl-C reaches bin/shoal.js and us both). */
const REPEAT_SIGNAL_MS = 1_000;

/**
 * The second signal stops at once by dying of the signal itself (the shell reports 130 / 143, as
 * for any program killed by Ctrl-C). process.exit would tear the model threads down in the middle
 * of an onnxruntime run, and onnxruntime's binding then aborts the process ("terminate called
 * after throwing an instance of 'Napi::Error'", exit status 134).
 */
function stopNow(signal: 'SIGINT' | 'SIGTERM'): void {
  for (const name of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.removeAllListeners(name);
  process.kill(process.pid, signal);
  // Should the default action not apply (a handler installed outside Node), still stop.
  setTimeout(() => process.exit(signal === 'SIGTERM' ? ExitCode.TERMINATED : ExitCode.INTERRUPTED), 1_000).unref();
}

/**
 * The servers (worker, sink, gateway, dev) bound their own stop (`--drain-timeout`,
 * `--shutdown-timeout-ms`); the one-shot commands get a deadline here instead, because the work
 * in flight can wait on something that never ends (a hung network mount, a stalled object
 * store) and a single SIGTERM must still stop the process before the orchestrator's SIGKILL.
 */
const SERVERS = new Set(['worker', 'sink', 'gateway', 'dev']);

/** The deadline of a one-shot command's stop (SHOAL_STOP_TIMEOUT_MS), null for a server or 0. */
function stopDeadlineMs(command: string | null, env: NodeJS.ProcessEnv): number | null {
  if (command !== null && SERVERS.has(command)) return null;
  const value = envValue(env, 'stopTimeoutMs');
  const ms = value !== undefined && /^\d+$/.test(value) ? Number(value) : Number(SETTINGS.stopTimeoutMs.default);
  return ms > 0 ? ms : null;
}

function installSignals(controller: AbortController, notice: (signal: NodeJS.Signals) => void, deadline: () => number | null): { received: () => NodeJS.Signals | null } {
  let first: { signal: NodeJS.Signals; at: number } | null = null;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (first === null) {
      first = { signal, at: Date.now() };
      controller.abort();
      notice(signal);
      const deadlineMs = deadline();
      if (deadlineMs !== null) {
        const stopping = signal === 'SIGTERM' ? 'SIGTERM' : 'SIGINT';
        setTimeout(() => {
          process.stderr.write(`the stop took over ${deadlineMs} ms (SHOAL_STOP_TIMEOUT_MS): stopping at once\n`);
          stopNow(stopping);
        }, deadlineMs).unref();
      }
      return;
    }
    if (Date.now() - first.at >= REPEAT_SIGNAL_MS) stopNow(signal === 'SIGTERM' ? 'SIGTERM' : 'SIGINT');
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // SIGHUP: the parent went away (a closed terminal; bin/shoal.js's watch when the npm or re-exec
  // parent is gone). It stops like SIGTERM, but never cuts short a stop already under way: after
  // Ctrl-C under npx the parent dies too, and that must not turn into an immediate exit.
  process.on('SIGHUP', () => {
    if (first === null) onSignal('SIGTERM');
  });
  return { received: () => first?.signal ?? null };
}

/**
 * Said on the first signal: the work in flight (an ingest wave of up to 256 chunks, a chunk of
 * lines) finishes before the command stops, which on a busy machine takes many seconds, and
 * without a word a user cannot tell a stop under way from a hang, nor that a second Ctrl-C
 * stops at once. Not with -q/--quiet (errors only).
 */
function stopNotice(argv: readonly string[], stderr: NodeJS.WritableStream): (signal: NodeJS.Signals) => void {
  const quiet = argv.includes('-q') || argv.includes('--quiet');
  return (signal) => {
    if (quiet) return;
    const again = signal === 'SIGINT' ? 'Ctrl-C again' : `a second ${signal}`;
    stderr.write(`stopping (${signal}): finishing the work in flight; ${again} stops at once\n`);
  };
}

/**
 * Commander's suggestion comes on a line of its own (`unknown option '--modle'` then
 * `(Did you mean --model?)`): joined into the one `error [CODE]: message` line.
 */
function usageMessage(commanderMessage: string): string {
  const message = commanderMessage
    .replace(/^error:\s*/i, '')
    .replace(/\s*\n\s*\(Did you mean (.+?)\)\s*$/s, '; did you mean $1');
  // `shoal search pilot boat`: the query is one argument.
  return /^too many arguments for 'search'/.test(message) ? `${message} Quote a query of several words: shoal search "pilot boat"` : message;
}

/**
 * An unknown word after a command group (`shoal models lst`, with `models` as `group`): commander
 * names the word alone and suggests bare subcommand names (`list`), which are no commands of
 * their own; said in full, as the user types them. Null when the unknown word is the command itself.
 */
function unknownSubcommandMessage(commanderMessage: string, group: string | null): string | null {
  const match = /^error: unknown command '(.*?)'(?:\s*\(Did you mean (one of )?(.+?)\?\))?\s*$/s.exec(commanderMessage);
  if (match === null || group === null || match[1] === group) return null;
  const [, word, oneOf, names] = match;
  const suggestion = names === undefined ? '' : `; did you mean ${oneOf ?? ''}${names.split(', ').map((name) => `${group} ${name}`).join(', ')}?`;
  return `unknown command '${group} ${word ?? ''}'${suggestion} (see shoal ${group} --help)`;
}

/** Commander's own errors (unknown option, missing argument...) are usage errors; `command` is the command word. */
function commanderExit(error: CommanderError, stderr: NodeJS.WritableStream, command: string | null): number {
  if (error.exitCode === 0) return ExitCode.OK;
  // `shoal` or `shoal models` alone: commander has already printed the help on stderr.
  const message =
    error.code === 'commander.help'
      ? 'name a command (see above)'
      : (unknownSubcommandMessage(error.message, command) ?? `${usageMessage(error.message)} (see --help)`);
  stderr.write(formatError(new ShoalError(ErrorCode.INVALID_INPUT, message)));
  return ExitCode.USAGE;
}

export async function main(argv: readonly string[]): Promise<number> {
  // Before any model thread starts (a long argument crashed onnxruntime's telemetry set-up).
  prepareOrtEnvironment(process.env);
  const controller = new AbortController();
  // No command known yet and the variables only; once the program is built, its command and the settings file.
  let deadlineMs = stopDeadlineMs(null, process.env);
  const signals = installSignals(controller, stopNotice(argv, process.stderr), () => deadlineMs);
  let command: string | null = null;
  try {
    // The settings file lies beneath the variables (flags → variables → file → defaults).
    // The process's settings, once: the settings file beneath the variables (flags → variables → file → defaults).
    const settings = ShoalSettings.load(argv, process.env);
    const app = new CliApp({ stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, env: settings.variables, settings, signal: controller.signal });
    const program = await buildProgram(app, argv.slice(2));
    command = commandWord(program, argv.slice(2));
    deadlineMs = stopDeadlineMs(command, settings.variables);
    // A server outlives one bad request: an unhandled rejection is logged, not the end of the process.
    // Imported only for them: one-shot commands must not load pino (test/integration/cli-lazy-imports.test.ts).
    if (command !== null && SERVERS.has(command)) {
      const [{ createLogger }, { logUnhandledRejections }] = await Promise.all([
        import('../../adapters/observability/logger.js'),
        import('../../adapters/observability/unhandled-rejections.js'),
      ]);
      logUnhandledRejections(createLogger(command, settings.value('logLevel')));
    }
    await program.parseAsync([...argv]);
    return ExitCode.OK;
  } catch (error) {
    if (error instanceof CommanderError) return commanderExit(error, process.stderr, command);
    if (isBrokenPipe(error)) return ExitCode.OK;
    const shoal = toShoalError(error);
    const received = signals.received();
    if (received !== null) {
      process.stderr.write(`interrupted (${received})\n${partialOutputNote(shoal)}`);
      return received === 'SIGTERM' ? ExitCode.TERMINATED : ExitCode.INTERRUPTED;
    }
    process.stderr.write(formatError(shoal));
    return exitCodeFor(shoal);
  }
}

/**
 * Resolves once everything written to `stream` so far has left the process. process.exit drops
 * what is still queued: a pipe whose reader is slow (`shoal search ... | slow-reader`) lost the
 * last hits while less than a high-water mark was queued, where waiting for 'drain' alone did not
 * wait. An empty write's callback runs after every earlier write, in order.
 */
function flushed(stream: NodeJS.WriteStream): Promise<void> {
  if (stream.errored !== null || stream.destroyed || stream.writableLength === 0) return Promise.resolve();
  return new Promise((resolve) => {
    stream.write('', () => resolve());
    stream.once('error', () => resolve());
  });
}

// A reader that went away (`shoal help encode | head -1`) is not a failure of shoal: without a
// listener, the EPIPE of a write made by commander or a command crashed with a stack trace.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
});

const code = await main(process.argv);
// Early model and prep threads (bin/shoal.js) that no command adopted: a usage error can come
// while they are still loading onnxruntime, and exiting then would abort the process.
await settleEarlyThreads();
await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
process.exit(code);
