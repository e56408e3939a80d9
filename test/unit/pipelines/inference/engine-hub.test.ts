import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rejection } from '../../../helpers/rejection.js';
import { z } from 'zod';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { parseCatalog } from '../../../../pipelines/inference/catalog.js';
import { InferenceEngine } from '../../../../pipelines/inference/engine.js';
import { conformanceDir, expectAllClose, loadConformance, numberMatrix } from '../../../helpers/conformance.js';
import { FakeHub } from '../../../helpers/fake-hub.js';
import { missingReason } from '../../../helpers/shared.js';
import { tempDir } from '../../../helpers/synthetic-repo.js';

/**
 * End to end: a catalog name → hub id → download from a (fake) hub into the cache → detection →
 * inference, reproducing the kit's reference embedding; then the same model offline from the cache.
 */

const kit = loadConformance('bert-mean-embed');

if (kit === null) {
  describe('engine with a hub catalog entry', () => {
    it.skip(missingReason(conformanceDir('bert-mean-embed')), () => undefined);
  });
} else {
  describe('engine with a hub catalog entry', () => {
    const kase = kit.cases.cases[0];
    const texts = z.looseObject({ texts: z.array(z.string()) }).parse(kase?.inputs).texts;
    const expected = numberMatrix(z.looseObject({ embeddings: z.unknown() }).parse(kase?.expected).embeddings, 'embeddings');
    const catalog = parseCatalog({ models: { minilm: { source: 'org/mini', description: 'kit bert-mean-embed served by the fake hub' } } }, 'test');
    let hub: FakeHub;
    let cache: string;
    let engine: InferenceEngine;

    beforeAll(async () => {
      hub = await FakeHub.start({ repos: { 'org/mini': kit.dir } });
      cache = await tempDir('engine-hub');
      engine = new InferenceEngine({ sources: { hubEndpoint: hub.url, hubCacheDir: cache, modelDirs: [] }, catalog, allowUnlisted: false });
    });
    afterAll(async () => {
      await engine.close();
      await hub.close();
      await rm(cache, { recursive: true, force: true });
    });

    it(`encode({model: 'minilm'}) downloads org/mini and reproduces case ${kase?.id}`, async () => {
      const result = await engine.encode({ model: 'minilm', items: texts });
      expect(result.model).toBe('minilm');
      expect(result.items).toHaveLength(expected.length);
      result.items.forEach((item, i) => expectAllClose(item.dense ?? [], expected[i] ?? [], kit.atol, `item ${i}`));
      const snapshot = join(cache, 'models--org--mini', 'snapshots', hub.repo('org/mini').commit);
      for (const path of ['onnx/model.onnx', 'tokenizer.json', '1_Pooling/config.json']) {
        expect((await readFile(join(snapshot, path))).equals(await readFile(join(kit.dir, path))), path).toBe(true);
      }
    });

    it('rejects names outside the catalog with MODEL_NOT_FOUND, without asking the hub', async () => {
      const before = hub.requests.length;
      for (const name of ['org/mini', 'unknown-model', kit.dir]) {
        const error = await rejection(engine.encode({ model: name, items: ['x'] }));
        expect(error.code, name).toBe(ErrorCode.MODEL_NOT_FOUND);
        expect(error.message).toContain('is not in the catalog (known: minilm)');
      }
      expect(hub.requests.length).toBe(before);
    });

    it('serves the cached model offline from a new engine', async () => {
      const before = hub.requests.length;
      const offline = new InferenceEngine({ sources: { hubEndpoint: hub.url, hubCacheDir: cache, modelDirs: [], allowDownload: false }, catalog });
      try {
        const result = await offline.encode({ model: 'minilm', items: texts.slice(0, 1) });
        expectAllClose(result.items[0]?.dense ?? [], expected[0] ?? [], kit.atol, 'offline item 0');
      } finally {
        await offline.close();
      }
      expect(hub.requests.length).toBe(before);
    });
  });
}
