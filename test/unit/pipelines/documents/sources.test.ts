import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { fileSources, recordSources, type RejectedRecord } from '../../../../pipelines/documents/sources.js';

const dir = await mkdtemp(join(tmpdir(), 'shoal-sources-'));
afterAll(() => rm(dir, { recursive: true, force: true }));
await mkdir(join(dir, 'sub', 'deep'), { recursive: true });
// Another index's LanceDB database (a table folder and the database's __manifest) and a file://
// index's table folder (_spec.json and one <40 hex>.jsonl per source): never walked into.
await mkdir(join(dir, 'old-index', 'chunks.lance', '_versions'), { recursive: true });
await writeFile(join(dir, 'old-index', 'chunks.lance', '_versions', '1.manifest'), 'not a document');
await mkdir(join(dir, 'old-index', '__manifest', '_versions'), { recursive: true });
await writeFile(join(dir, 'old-index', '__manifest', '_versions', 'latest_version_hint.json'), '{"version": 1}');
await mkdir(join(dir, 'file-index', 'chunks'), { recursive: true });
await writeFile(join(dir, 'file-index', 'chunks', '_spec.json'), '{}');
await writeFile(join(dir, 'file-index', 'chunks', `${'ab'.repeat(20)}.jsonl`), '{"id": "x"}');
for (const [path, text] of [['b.md', '# B'], ['a.txt', 'A'], ['sub/c.pdf', '%PDF'], ['sub/deep/d.txt', 'D'], ['sub/skip.log', 'L']]) {
  await writeFile(join(dir, path ?? ''), text ?? '');
}

describe('document sources', () => {
  it('walks folders in sorted order and applies include/exclude globs relative to the folder', async () => {
    const all = await fileSources([dir]);
    expect(all.map((s) => s.uri.slice(dir.length + 1))).toEqual(['a.txt', 'b.md', 'sub/c.pdf', 'sub/deep/d.txt', 'sub/skip.log']);
    const some = await fileSources([dir], { include: ['**/*.txt', '**/*.pdf'], exclude: ['sub/deep/**'] });
    expect(some.map((s) => s.uri.slice(dir.length + 1))).toEqual(['a.txt', 'sub/c.pdf']);
    // A file given twice (directly and inside its folder) is one source.
    expect((await fileSources([join(dir, 'a.txt'), dir], { include: ['*.txt'] })).length).toBe(1);
    const loaded = await all[0]?.load();
    expect(new TextDecoder().decode(loaded?.bytes)).toBe('A');
    expect(loaded?.source).toMatchObject({ uri: join(dir, 'a.txt'), path: join(dir, 'a.txt') });
  });

  it("skips the run's own index when it is named through a link, and keeps a folder that only holds a _spec.json among documents", async () => {
    const own = join(dir, 'old-index');
    const link = join(tmpdir(), `shoal-sources-link-${process.pid}`);
    await rm(link, { force: true });
    await symlink(own, link);
    const notes = join(dir, 'notes');
    await mkdir(notes);
    try {
      // The LanceDB folders above are skipped anyway; the link must still name the index for the skip.
      const found = await fileSources([dir], { skip: [link] });
      expect(found.map((s) => s.uri.slice(dir.length + 1))).toEqual(['a.txt', 'b.md', 'sub/c.pdf', 'sub/deep/d.txt', 'sub/skip.log']);
      await writeFile(join(notes, '_spec.json'), '{"a user": "file"}');
      await writeFile(join(notes, 'todo.md'), '# todo');
      expect((await fileSources([notes])).map((s) => s.uri.slice(notes.length + 1))).toEqual(['_spec.json', 'todo.md']);
    } finally {
      await rm(link, { force: true });
      await rm(notes, { recursive: true, force: true });
    }
  });

  it('lists a FIFO found in a folder, which then fails alone as when it is named', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'shoal-sources-fifo-'));
    try {
      await writeFile(join(folder, 'a.txt'), 'regular text');
      execFileSync('mkfifo', [join(folder, 'pipe.txt')]);
      const found = await fileSources([folder]);
      expect(found.map((s) => s.uri.slice(folder.length + 1))).toEqual(['a.txt', 'pipe.txt']);
      await expect(found[1]?.load()).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('is not a regular file (a named pipe)') });
    } finally {
      await rm(folder, { recursive: true, force: true });
    }
  });

  it('fails clearly on a missing path', async () => {
    await expect(fileSources([join(dir, 'nope')])).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('nope') });
  });

  it('reads {"id","text"} and {"id","path"} records', async () => {
    // A byte order mark before the first line (some editors write one) is not part of the JSON.
    const input = Readable.from(['\uFEFF{"id":"r1","text":"inline text"}\n', '\n', `{"id":2,"path":"a.txt"}\n`]);
    const records = await recordSources(input, dir);
    expect(records.map((r) => r.uri)).toEqual(['r1', '2']);
    const first = await records[0]?.load();
    expect(first?.source).toEqual({ uri: 'r1', id: 'r1', text: 'inline text' });
    expect(new TextDecoder().decode(first?.bytes)).toBe('inline text');
    const second = await records[1]?.load();
    expect(second?.source).toMatchObject({ uri: '2', id: '2', path: join(dir, 'a.txt') });
  });

  it.each([
    ['{"id":"x"}\n', 'line 1'],
    ['{"id":"x","text":"a","extra":1}\n', 'line 1'],
    ['{"id":"x","text":"a"}\nnot json\n', 'line 2: not JSON'],
    ['{"id":"x","text":"a"}\n{"id":"x","text":"b"}\n', 'duplicate id'],
    // Rounded by JSON.parse: 9007199254740993 would read as …992 and collide with it.
    ['{"id":9007199254740993,"text":"a"}\n', 'over 2^53'],
    // The advice quotes the line's own digits (JSON.parse rounded them to …992).
    ['{"id":9007199254740993,"text":"a"}\n', 'write it as a string, its digits in quotes: "id": "9007199254740993"'],
  ])('refuses bad records: %j', async (text, message) => {
    await expect(recordSources(Readable.from([text]), dir)).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining(message) });
  });

  it('hands bad lines to onReject (number, code, reason, the line cut at 10,000 characters) and keeps the good ones', async () => {
    const long = `{"id":"big","text":"${'x'.repeat(20_000)}"`;
    const lines = ['{"id":"a","text":"one"}', 'not json', '{"id":"a","text":"again"}', long, '{"id":"b","text":"two"}'];
    const rejected: RejectedRecord[] = [];
    const records = await recordSources(Readable.from([`${lines.join('\n')}\n`]), dir, undefined, { onReject: (line) => void rejected.push(line) });
    expect(records.map((r) => r.uri)).toEqual(['a', 'b']);
    expect(rejected.map((r) => [r.line, r.code, r.reason, r.truncated])).toEqual([
      [2, ErrorCode.INVALID_INPUT, 'stdin line 2: not JSON', false],
      [3, ErrorCode.INVALID_INPUT, 'stdin line 3: duplicate id "a"', false],
      [4, ErrorCode.INVALID_INPUT, 'stdin line 4: not JSON', true],
    ]);
    expect(rejected[0]?.input).toBe('not json');
    expect(rejected[2]?.input).toBe(long.slice(0, 10_000));
  });
});

describe('a file name that is not UTF-8', () => {
  it('fails alone with the reason, and a real name holding U+FFFD is read', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'shoal-sources-latin1-'));
    try {
      // "café.txt" in Latin-1: the byte 0xE9 alone is not UTF-8.
      const latin1 = Buffer.concat([Buffer.from(`${folder}/caf`), Buffer.from([0xe9]), Buffer.from('.txt')]);
      await writeFile(latin1, 'latin-1 name');
      await writeFile(join(folder, 'real\uFFFD.txt'), 'a true replacement character');
      const found = await fileSources([folder]);
      expect(found.map((s) => s.uri.slice(folder.length + 1))).toEqual(['caf\uFFFD.txt', 'real\uFFFD.txt']);
      await expect(found[0]?.load()).rejects.toMatchObject({ code: ErrorCode.NOT_FOUND, message: expect.stringContaining('not valid UTF-8') });
      expect(new TextDecoder().decode((await found[1]?.load())?.bytes)).toBe('a true replacement character');
    } finally {
      await rm(folder, { recursive: true, force: true });
    }
  });
});
