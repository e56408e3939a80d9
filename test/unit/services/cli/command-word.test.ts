import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { CliApp } from '../../../../services/cli/app.js';
import { buildProgram, commandWord } from '../../../../services/cli/program.js';

/**
 * services/cli/program.ts loads only the named command's file, so the word it takes for the
 * command must be the one commander will run: a global option's value is never a command.
 */

function app(): CliApp {
  return new CliApp({ stdin: new PassThrough(), stdout: new PassThrough(), stderr: new PassThrough(), env: {}, signal: new AbortController().signal });
}

describe('commandWord', () => {
  it('skips options and the values of global options that take one', async () => {
    const program = await buildProgram(app(), ['--version']);
    expect(program.commands).toEqual([]);
    expect(commandWord(program, ['encode', '--model', 'm'])).toBe('encode');
    expect(commandWord(program, ['--catalog', 'encode', 'score', '-m', 'x'])).toBe('score');
    expect(commandWord(program, ['--catalog=encode', 'score'])).toBe('score');
    expect(commandWord(program, ['-q', '--threads', '2', '--no-progress', 'ingest', 'docs'])).toBe('ingest');
    expect(commandWord(program, ['--model-dir', 'a:b', '--memory-budget', '2GiB', 'models', 'list'])).toBe('models');
    expect(commandWord(program, ['--quiet'])).toBeNull();
    expect(commandWord(program, ['--', 'encode'])).toBeNull();
  });

  it('registers the named command alone, every command otherwise', async () => {
    expect((await buildProgram(app(), ['--catalog', 'x.yaml', 'search', 'q'])).commands.map((command) => command.name())).toEqual(['search']);
    const all = (await buildProgram(app(), ['encod'])).commands.map((command) => command.name());
    expect(all).toHaveLength(16);
    expect(all.slice(0, 3)).toEqual(['encode', 'score', 'extract']);
    expect((await buildProgram(app())).commands).toHaveLength(16);
  });
});
