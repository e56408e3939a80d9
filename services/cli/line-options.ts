import { dirname, resolve } from 'node:path';
import type { Command } from 'commander';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { DEFAULT_LIMITS } from '../../adapters/protocol/limits.js';
import { OutputType } from '../../adapters/protocol/requests.js';
import type { ImagePolicyInput } from '../../adapters/sources/image-input.js';
import { PositiveIntFlag } from '../settings/flag-values.js';
import type { LineIo } from './app.js';

/**
 * Flags shared by the line commands (input, output, max length) and the zod parsing of a
 * command's own flags, with errors that name the flag as the user typed it (`--max-length`).
 */

// The shared text → value schemas, for the commands that import them from here.
export { CommaListFlag, NatsUrlsFlag, NatsUrlsText, PositiveIntFlag, UnitIntervalFlag } from '../settings/flag-values.js';

/** Zod shape of the flags `addLineIoOptions` declares. */
export const LineIoFlags = {
  input: z.string().min(1).optional(),
  out: z.string().min(1).optional(),
  maxLength: PositiveIntFlag(DEFAULT_LIMITS.maxSequenceLength).optional(),
  resume: z.boolean().optional(),
};

export interface LineIoOptions {
  /** `--output FILE` as a synonym of `--out` (every command but encode, where --output names representations). */
  outputFlagIsFile: boolean;
}

export function addLineIoOptions(command: Command, options: LineIoOptions): Command {
  command
    .option('-i, --input <file>', 'read JSON Lines from FILE (default: stdin)')
    .option('-o, --out <file>', 'write JSON Lines to FILE, renamed into place on success (default: stdout)');
  if (options.outputFlagIsFile) command.option('--output <file>', 'same as --out');
  command.option('--resume', 'continue the FILE.partial an interrupted --out FILE run left, after its last complete line');
  // `shoal encode -m M docs.jsonl`: a lone file argument is the input, as a newcomer expects.
  command.allowExcessArguments(true).hook('preAction', (self) => {
    const args = self.args;
    if (args.length === 0) return;
    const name = self.name();
    if (args.length > 1) {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `shoal ${name} reads one input file (-i/--input FILE, or the file as the only argument); got ${args.length} arguments: ${args.join(' ')}`);
    }
    const given: unknown = self.getOptionValue('input');
    if (given !== undefined && given !== args[0]) {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `shoal ${name}: --input ${String(given)} and the argument ${args[0]} name different input files; give one`);
    }
    self.setOptionValue('input', args[0]);
  });
  return command.option('--max-length <n>', "maximum tokens per input, special tokens included (default: the model's own)");
}

function flagName(key: string): string {
  return `--${key.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`)}`;
}

/**
 * The command as the user types it, without the program's name: a subcommand with its group
 * (`index documents`), since `shoal documents --help` names no command.
 */
export function commandPath(command: Command): string {
  const names: string[] = [];
  for (let at: Command | null = command; at?.parent; at = at.parent) names.unshift(at.name());
  return names.join(' ');
}

/** Parses `command.opts()` with `schema`; failures are INVALID_INPUT naming each flag. */
export function parseFlags<S extends z.ZodType>(schema: S, command: Command): z.output<S> {
  const result = schema.safeParse(command.opts());
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => {
    const key = issue.path[0];
    return `${typeof key === 'string' ? flagName(key) : 'options'}: ${issue.message}`;
  });
  const name = commandPath(command);
  throw new ShoalError(ErrorCode.INVALID_INPUT, `shoal ${name}: ${problems.join('; ')} (see shoal ${name} --help)`);
}

/** Zod shape of the flags `addImageOptions` declares (commander collects repeated flags into arrays). */
export const ImageFlags = {
  imageRoot: z.array(z.string().min(1)).default([]),
  allowImageHost: z.array(z.string().min(1)).default([]),
};

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** Where `{"image": ...}` lines may point: local folders and URL hosts. */
export function addImageOptions(command: Command): Command {
  return command
    .option('--image-root <dir>', 'folder that image paths may point into; repeatable (the current folder and the --input file\'s folder are always allowed)', collect)
    .option('--allow-image-host <host>', 'host that image URLs may be fetched from (exact, or *.example.com); repeatable (default: none)', collect);
}

/**
 * The image policy of a line command: the current folder, the folder of the --input file (a list
 * of image paths usually sits beside the images) and the --image-root folders, plus the allowed hosts.
 */
export function imagePolicyFromFlags(flags: { imageRoot: string[]; allowImageHost: string[]; input?: string | undefined }): ImagePolicyInput {
  const inputDir = flags.input === undefined ? [] : [dirname(resolve(flags.input))];
  return { roots: [...new Set([resolve('.'), ...inputDir, ...flags.imageRoot.map((dir) => resolve(dir))])], allowedHosts: flags.allowImageHost };
}

/** `--out` and its synonym `--output` must not disagree. */
export function lineIo(flags: { input?: string | undefined; out?: string | undefined; output?: string | undefined; resume?: boolean | undefined }): LineIo {
  if (flags.out !== undefined && flags.output !== undefined && flags.out !== flags.output) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `--out ${flags.out} and --output ${flags.output} name different files; give one`);
  }
  return { input: flags.input, output: flags.out ?? flags.output, resume: flags.resume === true };
}

/** `dense,sparse` → validated output types; `flag` names the option in the message. */
export function parseOutputTypes(value: string, flag: string, hint = ''): OutputType[] {
  const parts = value.split(',').map((part) => part.trim()).filter((part) => part !== '');
  const result = z.array(OutputType).min(1).safeParse(parts);
  if (result.success) return [...new Set(result.data)];
  throw new ShoalError(
    ErrorCode.INVALID_INPUT,
    `${flag} "${value}" is not a list of representations (dense, sparse, multivector)${hint}`,
  );
}
