import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { loadDefinitionFile, parseDefinition } from '../../../../pipelines/documents/definition.js';
import { settingsHash } from '../../../../pipelines/documents/identity.js';
import { shoalInProcess } from '../../../helpers/shoal-in-process.js';

/** The encode stage's optional `sparse` and `multivector` models: validated strictly, printed by `shoal pipelines show`, part of the settings hash. */

const dir = await mkdtemp(join(tmpdir(), 'shoal-encode-options-'));
afterAll(async () => rm(dir, { recursive: true, force: true }));

const YAML = `name: hybrid
stages:
  encode:
    model: BAAI/bge-small-en-v1.5
    sparse: {model: naver/splade-v3}
    multivector: {model: colbert-ir/colbertv2.0}
`;

describe('encode.sparse and encode.multivector', () => {
  it('are printed by shoal pipelines show, absent by default', async () => {
    const file = join(dir, 'hybrid.yaml');
    await writeFile(file, YAML);
    const shown = await shoalInProcess(['pipelines', 'show', file]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({
      stages: { encode: { model: 'BAAI/bge-small-en-v1.5', distance: 'cosine', sparse: { model: 'naver/splade-v3' }, multivector: { model: 'colbert-ir/colbertv2.0' } } },
    });
    const builtin = await shoalInProcess(['pipelines', 'show']);
    const encode = (JSON.parse(builtin.stdout) as { stages: { encode: Record<string, unknown> } }).stages.encode;
    expect(encode).not.toHaveProperty('sparse');
    expect(encode).not.toHaveProperty('multivector');
  });

  it('refuse a misspelt or missing key, naming its path', async () => {
    const file = join(dir, 'bad.yaml');
    await writeFile(file, YAML.replace('sparse: {model: naver/splade-v3}', 'sparse: {modle: naver/splade-v3}'));
    await expect(loadDefinitionFile(file)).rejects.toMatchObject({ code: ErrorCode.CONFIG_INVALID, message: expect.stringContaining('stages.encode.sparse') });
    expect(() => parseDefinition({ name: 'x', stages: { encode: { multivector: {} } } }, 'test')).toThrow(/stages\.encode\.multivector\.model/);
  });

  it('change the settings hash, so adding one re-ingests', async () => {
    const dense = parseDefinition({ name: 'x', stages: {} }, 'test');
    const sparse = parseDefinition({ name: 'x', stages: { encode: { sparse: { model: 's' } } } }, 'test');
    const both = parseDefinition({ name: 'x', stages: { encode: { sparse: { model: 's' }, multivector: { model: 'c' } } } }, 'test');
    expect(new Set([settingsHash(dense), settingsHash(sparse), settingsHash(both)]).size).toBe(3);
  });
});
