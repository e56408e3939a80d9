import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { resolvePipeline } from '../../../../pipelines/documents/builtin.js';
import { applyOverrides, loadDefinitionFile, parseDefinition } from '../../../../pipelines/documents/definition.js';
import { chunkId, contentHash, settingsHash } from '../../../../pipelines/documents/identity.js';

const dir = await mkdtemp(join(tmpdir(), 'shoal-pipeline-def-'));
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('pipeline definitions', () => {
  it('the built-in documents pipeline has every default filled in', async () => {
    const definition = await resolvePipeline(undefined);
    expect(definition).toEqual({
      name: 'documents',
      description: expect.any(String),
      stages: {
        parse: { ocr: 'auto', ocrModel: 'paddleocr/pp-ocrv4', ocrDpi: 150, furniture: 'drop', maxBytes: 100 * 1024 * 1024, maxPages: 5000 },
        chunk: { size: 200, overlap: 32 },
        encode: { model: 'sentence-transformers/all-MiniLM-L6-v2', distance: 'cosine' },
        write: { index: './shoal-index', table: 'chunks', batchRows: 2000 },
      },
    });
  });

  it('loads YAML with optional stages and rejects unknown keys, naming the path', async () => {
    const yaml = join(dir, 'p.yaml');
    await writeFile(yaml, 'name: legal\nstages:\n  chunk: {size: 128, overlap: 16}\n  classify:\n    labels: [contract, invoice]\n    threshold: 0.4\n');
    const definition = await loadDefinitionFile(yaml);
    expect(definition.stages.chunk).toEqual({ size: 128, overlap: 16 });
    expect(definition.stages.classify).toEqual({ labels: ['contract', 'invoice'], threshold: 0.4, topK: 3 });
    expect(definition.stages.extract).toBeUndefined();

    const bad = join(dir, 'bad.json');
    await writeFile(bad, JSON.stringify({ name: 'x', stages: { chunk: { size: 100, overlpa: 3 } } }));
    await expect(loadDefinitionFile(bad)).rejects.toMatchObject({ code: ErrorCode.CONFIG_INVALID, message: expect.stringContaining('stages.chunk') });
    expect(() => parseDefinition({ name: 'x', stages: { chunk: { size: 50, overlap: 50 } } }, 'inline')).toThrow(/overlap must be smaller than size/);
    // Every backend takes the table name (the docs' 1 to 48 characters; 128 passed before and file:// refused it).
    expect(() => parseDefinition({ name: 'x', stages: { write: { table: 'a'.repeat(49) } } }, 'inline')).toThrow(/1 to 48 letters/);
    // A small size alone takes a quarter of it as the overlap, not the default 32 (which it would be under).
    expect(parseDefinition({ name: 'x', stages: { chunk: { size: 16 } } }, 'inline').stages.chunk).toEqual({ size: 16, overlap: 4 });
    expect(parseDefinition({ name: 'x', stages: { chunk: { size: 512 } } }, 'inline').stages.chunk).toEqual({ size: 512, overlap: 32 });
  });

  it('a relative index written in a pipeline file is relative to the file; the default, URIs and absolute paths are kept', async () => {
    const folder = join(dir, 'configs');
    await mkdir(folder, { recursive: true });
    const cases: Array<[string, string]> = [
      ['stages:\n  write: {index: ./rel-idx}\n', join(folder, 'rel-idx')],
      ['stages:\n  chunk: {size: 64}\n', './shoal-index'],
      ['stages:\n  write: {index: "file:///tmp/out"}\n', 'file:///tmp/out'],
      ['stages:\n  write: {index: /srv/idx}\n', '/srv/idx'],
    ];
    for (const [i, [text, index]] of cases.entries()) {
      const file = join(folder, `p${i}.yaml`);
      await writeFile(file, text);
      expect((await loadDefinitionFile(file)).stages.write.index, text).toBe(index);
    }
  });

  it('a file without a name is named after itself, and its real mistake is the one reported', async () => {
    const unnamed = join(dir, 'short-chunks.yaml');
    await writeFile(unnamed, 'stages:\n  chunk: {size: 64, overlap: 8}\n');
    const definition = await loadDefinitionFile(unnamed);
    expect(definition.name).toBe('short-chunks');
    expect(definition.stages.chunk).toEqual({ size: 64, overlap: 8 });
    const misspelt = join(dir, 'misspelt.yaml');
    await writeFile(misspelt, 'stagse:\n  chunk: {size: 64}\n');
    const error = await loadDefinitionFile(misspelt).catch((caught: unknown) => caught);
    expect(error).toMatchObject({ code: ErrorCode.CONFIG_INVALID, message: expect.stringContaining('stagse') });
    expect((error as Error).message).not.toContain('name:');
  });

  it('a file too large to be a pipeline, or not a regular file, is refused before it is read', async () => {
    // A 300 MB file was read whole and parsed: 40 s, then the process died out of memory.
    const huge = join(dir, 'huge.yaml');
    await writeFile(huge, `name: huge\ndescription: "${'x'.repeat(2 * 1024 * 1024)}"\n`);
    await expect(loadDefinitionFile(huge)).rejects.toMatchObject({ code: ErrorCode.CONFIG_INVALID, message: expect.stringContaining('larger than a pipeline file may be (1048576 bytes)') });
    // A device is endless (/dev/zero was read up to V8's string limit); a folder is not a file.
    for (const path of ['/dev/zero', dir]) {
      await expect(loadDefinitionFile(path)).rejects.toMatchObject({ code: ErrorCode.CONFIG_INVALID, message: `pipeline file ${path}: not a regular file` });
    }
  });

  it('an empty file, or one of comments only, says so instead of "expected object, received null"', async () => {
    for (const [name, text] of [['empty.yaml', ''], ['blank.json', '  \n'], ['comments.yaml', '# nothing yet\n']] as const) {
      const path = join(dir, name);
      await writeFile(path, text);
      const error = await loadDefinitionFile(path).catch((caught: unknown) => caught);
      expect(error, name).toMatchObject({ code: ErrorCode.CONFIG_INVALID, message: expect.stringContaining(`pipeline file ${path}: empty (or only comments)`) });
    }
  });

  it('a duplicate key in a JSON file is refused, as in YAML (JSON.parse kept the last one silently); a byte order mark is not an error', async () => {
    const json = join(dir, 'twice.json');
    await writeFile(json, '{"name": "t", "stages": {"encode": {"model": "a", "model": "b"}}}');
    const error = await loadDefinitionFile(json).catch((caught: unknown) => caught);
    expect(error).toMatchObject({ code: ErrorCode.CONFIG_INVALID, message: `pipeline file ${json}: not valid JSON` });
    expect(String((error as Error).cause)).toContain('Map keys must be unique');
    const bom = join(dir, 'bom.json');
    await writeFile(bom, '\uFEFF{"name": "t", "stages": {"chunk": {"size": 64}}}');
    expect((await loadDefinitionFile(bom)).stages.chunk.size).toBe(64);
  });

  it('YAML aliases that expand without bound (billion laughs) are refused', async () => {
    const lines = ['name: bomb', 'x0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]'];
    for (let level = 1; level < 10; level++) lines.push(`x${level}: &a${level} [${Array.from({ length: 10 }, () => `*a${level - 1}`).join(', ')}]`);
    const bomb = join(dir, 'laughs.yaml');
    await writeFile(bomb, `${lines.join('\n')}\n`);
    const error = await loadDefinitionFile(bomb).catch((caught: unknown) => caught);
    expect(error).toMatchObject({ code: ErrorCode.CONFIG_INVALID, message: `pipeline file ${bomb}: not valid YAML` });
    expect(String((error as Error).cause)).toContain('Excessive alias count');
  });

  it('an unknown built-in name is a bad command line (CONFIG_INVALID, exit 2), as a missing pipeline file is', async () => {
    await expect(resolvePipeline('nope')).rejects.toMatchObject({ code: ErrorCode.CONFIG_INVALID, message: expect.stringContaining('built-in: documents') });
  });

  it('--chunk-size / --chunk-overlap override the chunk stage and change the settings hash', async () => {
    const base = await resolvePipeline('documents');
    const small = applyOverrides(base, { chunkSize: 16 });
    // The pipeline's overlap (32) does not fit 16: the size's own default, min(32, 16 / 4).
    expect(small.stages.chunk).toEqual({ size: 16, overlap: 4 });
    expect(applyOverrides(base, { chunkSize: 64, chunkOverlap: 0 }).stages.chunk).toEqual({ size: 64, overlap: 0 });
    expect(applyOverrides(base, { chunkOverlap: 10 }).stages.chunk).toEqual({ size: base.stages.chunk.size, overlap: 10 });
    expect(settingsHash(small)).not.toBe(settingsHash(base));
    expect(settingsHash(applyOverrides(base, { chunkOverlap: 10 }))).not.toBe(settingsHash(base));
    expect(() => applyOverrides(base, { chunkSize: 16, chunkOverlap: 16 })).toThrow(expect.objectContaining({ code: ErrorCode.CONFIG_INVALID, message: expect.stringContaining('overlap must be smaller than size') }));
  });

  it('command-line overrides win and the settings hash follows only what changes rows', async () => {
    const base = await resolvePipeline('documents');
    const moved = applyOverrides(base, { index: '/elsewhere', table: 't2' });
    expect(moved.stages.write).toMatchObject({ index: '/elsewhere', table: 't2' });
    expect(settingsHash(moved)).toBe(settingsHash(base));
    const otherModel = applyOverrides(base, { model: 'BAAI/bge-small-en-v1.5' });
    expect(otherModel.stages.encode.model).toBe('BAAI/bge-small-en-v1.5');
    expect(settingsHash(otherModel)).not.toBe(settingsHash(base));
    expect(settingsHash(applyOverrides(base, { ocr: 'never' }))).not.toBe(settingsHash(base));
    // Keeping page furniture changes the rows of a PDF: a re-run with it re-ingests.
    expect(settingsHash({ ...base, stages: { ...base.stages, parse: { ...base.stages.parse, furniture: 'keep' } } })).not.toBe(settingsHash(base));
    expect(settingsHash(base)).toMatch(/^[0-9a-f]{16}$/);
  });

  it('ids are deterministic and distinguish source, content, settings and position', () => {
    const doc = contentHash(new TextEncoder().encode('hello'));
    expect(doc).toBe('2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824');
    const id = chunkId('/a.txt', doc, 's1', 0);
    expect(chunkId('/a.txt', doc, 's1', 0)).toBe(id);
    expect(new Set([id, chunkId('/b.txt', doc, 's1', 0), chunkId('/a.txt', 'other', 's1', 0), chunkId('/a.txt', doc, 's2', 0), chunkId('/a.txt', doc, 's1', 1)]).size).toBe(5);
  });
});
