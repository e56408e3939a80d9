import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeFileAtomically } from '../../../../adapters/support/atomic-write.js';

/**
 * The one atomic write of the caches (quantized and mapped graphs, records, batch tuning, category
 * matrices), the hub download (refs), the JSON Lines index, the results sink and file:// result
 * targets: a reader sees the old content or the whole new one, and nothing is left behind.
 */

const root = mkdtempSync(join(tmpdir(), 'shoal-atomic-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('writeFileAtomically', () => {
  it('writes every chunk, creating missing folders, and replaces an existing file', async () => {
    const target = join(root, 'refs', 'deep', 'main');
    await writeFileAtomically(target, [Buffer.from('abc'), Buffer.from('def')]);
    expect(readFileSync(target, 'utf8')).toBe('abcdef');
    await writeFileAtomically(target, [Buffer.from('0123456789abcdef')]);
    expect(readFileSync(target, 'utf8')).toBe('0123456789abcdef');
    expect(readdirSync(join(root, 'refs', 'deep'))).toEqual(['main']);
  });

  it('takes text, one byte array or several, and writes the same bytes', async () => {
    const text = 'ünïcode ✓ text\n';
    await writeFileAtomically(join(root, 'as-text'), text);
    await writeFileAtomically(join(root, 'as-bytes'), new TextEncoder().encode(text));
    await writeFileAtomically(join(root, 'as-empty'), '');
    expect(readFileSync(join(root, 'as-text'), 'utf8')).toBe(text);
    expect(readFileSync(join(root, 'as-bytes'), 'utf8')).toBe(text);
    expect(readFileSync(join(root, 'as-empty'), 'utf8')).toBe('');
  });

  it('lets concurrent writers of one target in one process finish with one whole content', async () => {
    const target = join(root, 'race');
    const contents = Array.from({ length: 16 }, (_, index) => `${String(index).padStart(2, '0')}`.repeat(10_000));
    await Promise.all(contents.map((text) => writeFileAtomically(target, [Buffer.from(text)])));
    expect(contents).toContain(readFileSync(target, 'utf8'));
    expect(readdirSync(root).filter((name) => name.startsWith('race'))).toEqual(['race']);
  });

  it('fails with the file system error and leaves no temporary file', async () => {
    writeFileSync(join(root, 'plain'), 'a file, not a folder');
    await expect(writeFileAtomically(join(root, 'plain', 'below'), [Buffer.from('x')])).rejects.toMatchObject({ code: 'ENOTDIR' });
    const folder = join(root, 'target-is-folder');
    await writeFileAtomically(join(folder, 'inner'), [Buffer.from('x')]);
    await expect(writeFileAtomically(folder, [Buffer.from('y')])).rejects.toMatchObject({ code: expect.stringMatching(/EISDIR|ENOTEMPTY|EEXIST/) });
    expect(readdirSync(root).filter((name) => name.includes('.tmp-'))).toEqual([]);
  });
});
