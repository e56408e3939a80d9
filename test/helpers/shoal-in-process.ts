import { PassThrough, Writable } from 'node:stream';
import { toShoalError } from '../../adapters/protocol/errors.js';
import { CliApp } from '../../services/cli/app.js';
import { exitCodeFor, formatError } from '../../services/cli/exit.js';
import { buildProgram } from '../../services/cli/program.js';

/**
 * The real `shoal` command tree run inside the test process (no child process to start, which
 * costs seconds on the shared test machine): the same commands, engine and files, with stdout and
 * stderr collected and a thrown error turned into the exit status and message main.ts would print.
 * Signals and process exits are what it does not cover; those tests use child processes.
 */

class Collect extends Writable {
  text = '';
  override _write(chunk: Buffer, _encoding: string, done: () => void): void {
    this.text += chunk.toString();
    done();
  }
}

export interface InProcessRun {
  code: number;
  stdout: string;
  stderr: string;
}

export async function shoalInProcess(args: readonly string[], options: { env?: Record<string, string>; stdin?: string } = {}): Promise<InProcessRun> {
  const stdout = new Collect();
  const stderr = new Collect();
  const stdin = new PassThrough();
  stdin.end(options.stdin ?? '');
  const app = new CliApp({ stdin, stdout, stderr, env: { SHOAL_THREADS: '1', ...options.env }, signal: new AbortController().signal });
  try {
    await (await buildProgram(app, args)).parseAsync(['node', 'shoal', ...args]);
    return { code: 0, stdout: stdout.text, stderr: stderr.text };
  } catch (error) {
    const shoal = toShoalError(error);
    return { code: exitCodeFor(shoal), stdout: stdout.text, stderr: stderr.text + formatError(shoal) };
  }
}
