import { closeSync, openSync } from 'node:fs';
import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { RejectsFile } from '../../../../services/cli/rejects-file.js';

const dir = await mkdtemp(join(tmpdir(), 'shoal-rejects-'));
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('--rejects and the file on stdin', () => {
  it('refuses the file being read on stdin (also through another name), and leaves it untouched', async () => {
    const input = join(dir, 'records.jsonl');
    await writeFile(input, '{"id": "a", "text": "kept"}\n');
    await symlink(input, join(dir, 'alias.jsonl'));
    const fd = openSync(input, 'r');
    try {
      for (const path of [input, join(dir, 'alias.jsonl')]) {
        await expect(RejectsFile.forInput(path, fd)).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('is the file being read on stdin') });
      }
      // Another file, or one that does not exist yet, is fine.
      expect((await RejectsFile.forInput(join(dir, 'rejects.jsonl'), fd)).path).toBe(join(dir, 'rejects.jsonl'));
    } finally {
      closeSync(fd);
    }
    expect(await readFile(input, 'utf8')).toBe('{"id": "a", "text": "kept"}\n');
  });

  it('takes any file when stdin is not a file of this process (a pipe, a test stream)', async () => {
    const input = join(dir, 'other.jsonl');
    await writeFile(input, 'x\n');
    expect((await RejectsFile.forInput(input, null)).path).toBe(input);
  });
});
