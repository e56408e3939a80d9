import { ErrorCode, serializeError, type ShoalError } from '../../adapters/protocol/errors.js';
import { printableLines } from './printable.js';

/**
 * Exit statuses and the one way an error reaches the user: `error [CODE]: message` on stderr.
 * Scripts can tell "fix your command or input" (2) from "something failed while running" (1).
 */

export const ExitCode = {
  OK: 0,
  /** The model, the runtime or the machine failed (MODEL_NOT_FOUND, MODEL_LOAD_FAILED, INFERENCE_FAILED...). */
  RUNTIME: 1,
  /** Bad flags, configuration or input lines: nothing will change until the command or input does. */
  USAGE: 2,
  /** Some documents of `shoal ingest` failed (PARTIAL_FAILURE); the others were written. */
  PARTIAL: 3,
  /** Stopped by SIGINT (128 + 2, the shell convention). */
  INTERRUPTED: 130,
  /** Stopped by SIGTERM (128 + 15). */
  TERMINATED: 143,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** Codes that mean the command line or the input must change. */
const USAGE_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  ErrorCode.INVALID_INPUT,
  ErrorCode.INPUT_TOO_LARGE,
  ErrorCode.CONFIG_INVALID,
  ErrorCode.UNSUPPORTED_OPERATION,
  // A --job-id already used with other content: the caller changes the id or the input.
  ErrorCode.JOB_CONFLICT,
]);

export function exitCodeFor(error: ShoalError): ExitCode {
  if (USAGE_CODES.has(error.code)) return ExitCode.USAGE;
  if (error.code === ErrorCode.CANCELLED) return ExitCode.INTERRUPTED;
  if (error.code === ErrorCode.PARTIAL_FAILURE) return ExitCode.PARTIAL;
  return ExitCode.RUNTIME;
}

/** `error [CODE]: message`, plus the underlying cause on its own line when it adds something. */
/**
 * Fields the lower layers name in `details.field` that are this CLI's flags: their messages start
 * with the field's name (`filter: …`, `mode text needs …`, as a JSON request reads them), and a
 * terminal user reads the flag they typed (`--filter: …`).
 */
const FLAG_FIELDS: ReadonlySet<string> = new Set(['filter', 'mode', 'index']);

/** The message as the CLI words it: a field that is one of its flags named as that flag. */
export function cliMessage(error: ShoalError): string {
  const field = error.details?.field;
  if (typeof field !== 'string' || !FLAG_FIELDS.has(field) || !error.message.startsWith(field)) return error.message;
  return `--${error.message}`;
}

export function formatError(error: ShoalError): string {
  const serialized = { ...serializeError(error), message: cliMessage(error) };
  // A message may quote a file or key name: what a terminal would act on is escaped (printable.ts).
  const lines = [`error [${serialized.code}]: ${printableLines(serialized.message)}`];
  if (serialized.cause !== undefined && !serialized.message.includes(serialized.cause)) lines.push(`  cause: ${printableLines(serialized.cause)}`);
  return `${lines.join('\n')}\n${partialOutputNote(error)}`;
}

/** Where the results written before a failure or an interrupt were kept (`--out FILE.partial`), if anywhere. */
export function partialOutputNote(error: ShoalError): string {
  const partial = error.details?.partialOutput;
  if (typeof partial !== 'string') return '';
  return `  the ${String(error.details?.linesWritten ?? 'first')} result lines written before it stopped are in ${partial}; run the same command with --resume to continue after them\n`;
}
