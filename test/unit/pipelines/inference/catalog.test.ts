import { mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rejection } from '../../../helpers/rejection.js';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { EMPTY_CATALOG, loadCatalog, parseCatalog, type Catalog } from '../../../../pipelines/inference/catalog.js';
import { REPO_ROOT } from '../../../helpers/shared.js';
import { tempDir } from '../../../helpers/synthetic-repo.js';

let root: string;
let files = 0;

async function write(path: string, text: string): Promise<string> {
  const full = join(root, path);
  await mkdir(join(full, '..'), { recursive: true });
  await writeFile(full, text);
  return full;
}

function asObject(catalog: Catalog): Record<string, unknown> {
  return Object.fromEntries(catalog.entries);
}

const YAML_CATALOG = `# models served by this deployment
models:
  minilm:
    source: sentence-transformers/all-MiniLM-L6-v2
    description: small English embedder
    max_length: 256
  bge-small:
    source: BAAI/bge-small-en-v1.5@main
    query_prompt: query
    prompts:
      query: "Represent this sentence for searching relevant passages: "
    precision: int8
    runtime:
      intraOpThreads: 2
  local-ner:
    source: ./models/ner
    family: token-classification
  Xenova/all-MiniLM-L6-v2: {}
`;

const EXPECTED = {
  minilm: { source: 'sentence-transformers/all-MiniLM-L6-v2', description: 'small English embedder', max_length: 256 },
  'bge-small': {
    source: 'BAAI/bge-small-en-v1.5@main',
    query_prompt: 'query',
    prompts: { query: 'Represent this sentence for searching relevant passages: ' },
    precision: 'int8',
    runtime: { intraOpThreads: 2 },
  },
  'Xenova/all-MiniLM-L6-v2': {},
};

beforeAll(async () => {
  root = await tempDir('catalog');
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('catalog files', () => {
  it('loads a YAML file, anchoring relative folder sources at the file', async () => {
    const file = await write('conf/catalog.yaml', YAML_CATALOG);
    const catalog = await loadCatalog(file);
    expect(asObject(catalog)).toEqual({ ...EXPECTED, 'local-ner': { source: join(root, 'conf', 'models', 'ner'), family: 'token-classification' } });
    expect([...catalog.entries.keys()]).toEqual(['minilm', 'bge-small', 'local-ner', 'Xenova/all-MiniLM-L6-v2']);
  });

  it('overrides only the runtime settings it names (no defaults filled in)', async () => {
    const catalog = await loadCatalog(await write('runtime.yaml', 'models:\n  m:\n    source: org/m\n    runtime: {intraOpThreads: 2}\n'));
    expect(catalog.entries.get('m')?.runtime).toEqual({ intraOpThreads: 2 });
  });

  it('loads the same catalog from JSON', async () => {
    const json = JSON.stringify({ models: { ...EXPECTED, 'local-ner': { source: './models/ner', family: 'token-classification' } } });
    const catalog = await loadCatalog(await write('json/catalog.json', json));
    expect(asObject(catalog)).toEqual({ ...EXPECTED, 'local-ner': { source: join(root, 'json', 'models', 'ner'), family: 'token-classification' } });
  });

  it('keeps absolute, home and hub sources as written', async () => {
    const catalog = await loadCatalog(await write('abs.yaml', 'models:\n  a: {source: /srv/models/a}\n  b: {source: org/b}\n'));
    expect(asObject(catalog)).toEqual({ a: { source: '/srv/models/a' }, b: { source: 'org/b' } });
  });

  it('accepts an empty models map, or none', async () => {
    expect((await loadCatalog(await write('empty.yaml', 'models: {}\n'))).entries.size).toBe(0);
    expect((await loadCatalog(await write('none.json', '{}'))).entries.size).toBe(0);
    expect(EMPTY_CATALOG.entries.size).toBe(0);
  });
});

describe('catalog folders', () => {
  it('loads one model per file, skipping hidden entries and other files', async () => {
    await write('folder/sentence-transformers__all-MiniLM-L6-v2.yaml', 'name: minilm\nsource: sentence-transformers/all-MiniLM-L6-v2\nmax_length: 256\n');
    await write('folder/BAAI__bge-small.json', JSON.stringify({ name: 'bge-small', source: 'BAAI/bge-small-en-v1.5', precision: 'int8' }));
    await write('folder/ner.yml', 'name: local-ner\nsource: ../models/ner\nfamily: token-classification\n');
    await write('folder/README.md', '# not a model\n');
    await write('folder/.minilm.yaml.swp', 'garbage');
    await write('folder/..2024_01_01/old.yaml', 'name: stale\n');
    await symlink('..2024_01_01', join(root, 'folder', '..data'));
    const catalog = await loadCatalog(join(root, 'folder'));
    expect(asObject(catalog)).toEqual({
      'bge-small': { source: 'BAAI/bge-small-en-v1.5', precision: 'int8' },
      'local-ner': { source: join(root, 'models', 'ner'), family: 'token-classification' },
      minilm: { source: 'sentence-transformers/all-MiniLM-L6-v2', max_length: 256 },
    });
  });

  it('CONFIG_INVALID naming both files when a name is defined twice', async () => {
    await write('dupes/a.yaml', 'name: minilm\nsource: org/a\n');
    await write('dupes/b.yaml', 'name: minilm\nsource: org/b\n');
    const error = await rejection(loadCatalog(join(root, 'dupes')));
    expect(error.code).toBe(ErrorCode.CONFIG_INVALID);
    expect(error.message).toContain('model "minilm" is defined twice (a.yaml and b.yaml)');
  });

  it('CONFIG_INVALID when a file lacks its name', async () => {
    await write('nameless/a.yaml', 'source: org/a\n');
    const error = await rejection(loadCatalog(join(root, 'nameless')));
    expect(error.code).toBe(ErrorCode.CONFIG_INVALID);
    expect(error.message).toContain('name:');
    expect(error.message).toContain('a.yaml');
  });
});

describe('catalog errors', () => {
  it.each([
    ['a top-level typo', 'modles:\n  m: {source: org/m}\n', 'Unrecognized key: "modles"'],
    ['an entry typo', 'models:\n  m:\n    source: org/m\n    max_len: 128\n', 'models.m: Unrecognized key: "max_len"'],
    ['a nested typo', 'models:\n  m:\n    source: org/m\n    runtime: {threads: 2}\n', 'models.m.runtime: Unrecognized key: "threads"'],
    ['an unknown family', 'models:\n  m: {source: org/m, family: magic}\n', 'models.m.family'],
    ['a wrong type', 'models:\n  m: {source: org/m, max_length: long}\n', 'models.m.max_length'],
    ['a name with spaces', 'models:\n  "my model": {source: org/m}\n', 'model names use letters'],
  ])('CONFIG_INVALID for %s, naming it', async (_what, text, naming) => {
    const error = await rejection(loadCatalog(await write(`bad-${(files += 1)}.yaml`, text)));
    expect(error.code).toBe(ErrorCode.CONFIG_INVALID);
    expect(error.message).toContain(naming);
  });

  it('CONFIG_INVALID for an unknown key in a folder file', async () => {
    await write('typo-folder/m.yaml', 'name: m\nsource: org/m\ndefault_promt: query\n');
    const error = await rejection(loadCatalog(join(root, 'typo-folder')));
    expect(error.code).toBe(ErrorCode.CONFIG_INVALID);
    expect(error.message).toContain('Unrecognized key: "default_promt"');
  });

  it('CONFIG_INVALID for duplicate names in one YAML or JSON file', async () => {
    const yaml = await rejection(loadCatalog(await write('dupe.yaml', 'models:\n  m: {source: org/a}\n  m: {source: org/b}\n')));
    expect(yaml.code).toBe(ErrorCode.CONFIG_INVALID);
    expect(yaml.message).toContain('Map keys must be unique');
    const json = await rejection(loadCatalog(await write('dupe.json', '{"models": {"m": {"source": "org/a"}, "m": {"source": "org/b"}}}')));
    expect(json.code).toBe(ErrorCode.CONFIG_INVALID);
    expect(json.message).toContain('Map keys must be unique');
  });

  it('CONFIG_INVALID for a bad model reference, found at load time', async () => {
    const traversal = await rejection(loadCatalog(await write('traversal.yaml', 'models:\n  m: {source: "org/../etc"}\n')));
    expect(traversal.code).toBe(ErrorCode.CONFIG_INVALID);
    expect(traversal.message).toContain('model "m"');
    const nameOnly = await rejection(loadCatalog(await write('name-only.yaml', 'models:\n  a/b/c: {}\n')));
    expect(nameOnly.code).toBe(ErrorCode.CONFIG_INVALID);
    expect(nameOnly.message).toContain('add a source');
  });

  it('CONFIG_INVALID for syntax errors', async () => {
    const yaml = await rejection(loadCatalog(await write('broken.yaml', 'models:\n  m: {source: org/m\n')));
    expect(yaml.code).toBe(ErrorCode.CONFIG_INVALID);
    expect(yaml.message).toContain('is not valid YAML');
    const json = await rejection(loadCatalog(await write('broken.json', '{"models": {')));
    expect(json.code).toBe(ErrorCode.CONFIG_INVALID);
    expect(json.message).toContain('is not valid JSON');
  });

  it('CONFIG_INVALID for a missing file', async () => {
    const error = await rejection(loadCatalog(join(root, 'nope.yaml')));
    expect(error.code).toBe(ErrorCode.CONFIG_INVALID);
    expect(error.message).toBe(`catalog ${join(root, 'nope.yaml')} does not exist`);
  });

  it('parseCatalog validates data built in code the same way', () => {
    expect(() => parseCatalog({ models: { m: { source: 'org/m', colour: 'blue' } } }, 'inline')).toThrow(/invalid catalog inline: models\.m: Unrecognized key: "colour"/);
  });
});

describe('docs/models.md', () => {
  async function codeBlocks(language: string): Promise<string[]> {
    const text = await readFile(join(REPO_ROOT, 'docs', 'models.md'), 'utf8');
    return [...text.matchAll(new RegExp(`\`\`\`${language}\n([\\s\\S]*?)\`\`\``, 'g'))].map((m) => m[1] ?? '');
  }

  it('its catalog examples load as they are written', async () => {
    const [full, single] = await codeBlocks('yaml');
    const catalog = await loadCatalog(await write('docs/catalog.yaml', full ?? ''));
    expect([...catalog.entries.keys()]).toEqual(['minilm', 'bge-small', 'e5-small', 'qwen3-embed', 'reranker', 'house-ner', 'custom-pooling', 'Xenova/all-MiniLM-L6-v2']);
    expect(catalog.entries.get('house-ner')?.source).toBe(join(root, 'docs', 'models', 'house-ner'));
    expect(catalog.entries.get('bge-small')?.runtime).toEqual({ intraOpThreads: 2, providers: ['cuda', 'cpu'] });
    expect(catalog.entries.get('qwen3-embed')?.instruction_template).toBe('Instruct: {instruction}\nQuery:');
    const [json] = await codeBlocks('json');
    expect(asObject(await loadCatalog(await write('docs/catalog.json', json ?? '')))).toEqual({
      minilm: { source: 'sentence-transformers/all-MiniLM-L6-v2', max_length: 256 },
    });
    await write('docs/folder/sentence-transformers__all-MiniLM-L6-v2.yaml', single ?? '');
    expect([...(await loadCatalog(join(root, 'docs', 'folder'))).entries.keys()]).toEqual(['minilm']);
  });
});
