import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { closeNames, editDistance, missingModelDirs, modelsInDir } from '../../../../adapters/sources/model-dirs.js';
import { resolveModelSource, resolveSourceOptions } from '../../../../adapters/sources/resolve.js';
import { FIXTURES_DIR } from '../../../helpers/shared.js';

/**
 * What the models directories answer a name they do not hold: the close names (edit distance),
 * and the folders that do not exist; a bare mistyped name never reaches the hub.
 */

const MODELS = join(FIXTURES_DIR, 'models');
/** Nothing listens here: reaching for the hub would fail with DOWNLOAD_FAILED, not MODEL_NOT_FOUND. */
const NO_HUB = 'http://127.0.0.1:9';

describe('models directories', () => {
  it('edit distance is Levenshtein, case-insensitive', () => {
    expect([editDistance('kitten', 'sitting'), editDistance('', 'abc'), editDistance('MiniLM', 'minilm'), editDistance('tiny-bert-maen', 'tiny-bert-mean')]).toEqual([3, 3, 0, 2]);
  });

  it('close names: nearest first, within a third of the length, org/name compared on the name too', () => {
    const known = ['tiny-bert-mean', 'tiny-roberta-mean', 'tiny-ner', 'BAAI/bge-small-en-v1.5', 'paddleocr/pp-ocrv4'];
    expect(closeNames('tiny-bert-maen', known)).toEqual(['tiny-bert-mean']);
    expect(closeNames('tiny-bert', known)).toEqual(['tiny-ner']);
    expect(closeNames('bge-smal-en-v1.5', known)).toEqual(['BAAI/bge-small-en-v1.5']);
    expect(closeNames('paddleocr/pp-ocr4', known)).toEqual(['paddleocr/pp-ocrv4']);
    expect(closeNames('completely-else', known)).toEqual([]);
    expect(closeNames('tiny-ner', known)).toEqual([]);
  });

  it('lists the model folders and names the missing directories', async () => {
    expect(await modelsInDir(MODELS)).toEqual(expect.arrayContaining(['tiny-bert-mean', 'tiny-gliner', 'tiny-image-classifier']));
    expect(await missingModelDirs([MODELS, join(MODELS, 'nope')])).toEqual([join(MODELS, 'nope')]);
  });

  it('a bare name close to a local model fails at once with MODEL_NOT_FOUND and the close names', async () => {
    const options = resolveSourceOptions({ modelDirs: [MODELS], hubEndpoint: NO_HUB, downloadAttempts: 1, hubCacheDir: join(MODELS, 'no-cache') });
    await expect(resolveModelSource('tiny-bert-maen', options)).rejects.toMatchObject({
      code: ErrorCode.MODEL_NOT_FOUND,
      message: expect.stringContaining('close names: tiny-bert-mean'),
      details: expect.objectContaining({ closeNames: ['tiny-bert-mean'] }),
    });
  });

  it('a bare name while a models directory is missing fails at once, naming the directory', async () => {
    const options = resolveSourceOptions({ modelDirs: [join(MODELS, 'nope')], hubEndpoint: NO_HUB, downloadAttempts: 1, hubCacheDir: join(MODELS, 'no-cache') });
    await expect(resolveModelSource('tiny-bert-mean', options)).rejects.toMatchObject({
      code: ErrorCode.MODEL_NOT_FOUND,
      message: `model tiny-bert-mean was not found in the models directories (${join(MODELS, 'nope')}); models directory ${join(MODELS, 'nope')} does not exist`,
    });
  });

  it('an org/name id still goes to the hub, and its failure says the models directories were searched first', async () => {
    const options = resolveSourceOptions({ modelDirs: [MODELS, join(MODELS, 'nope')], hubEndpoint: NO_HUB, downloadAttempts: 1, hubCacheDir: join(MODELS, 'no-cache') });
    const failure = await resolveModelSource('someorg/tiny-bert-maen', options).catch((error: unknown) => error);
    expect(failure).toMatchObject({ code: ErrorCode.DOWNLOAD_FAILED });
    expect(String((failure as Error).message)).toMatch(/^model someorg\/tiny-bert-maen was not found in the models directories .*; models directory .*nope does not exist; close names: tiny-bert-mean.*; then the hub: /);
  });
});
