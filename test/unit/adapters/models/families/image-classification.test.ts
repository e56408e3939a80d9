import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../../adapters/protocol/errors.js';
import { imagenetRecipe } from '../../../../../adapters/models/image/image-preprocess.js';
import { parseCatalog } from '../../../../../pipelines/inference/catalog.js';
import { InferenceEngine } from '../../../../../pipelines/inference/engine.js';
import { expectAllClose } from '../../../../helpers/conformance.js';
import { loadImageWeights, png, solidOutputs } from '../../../../helpers/tiny-image-model.js';
import { fixtureDir, softmax } from '../../../../helpers/tiny-model.js';

/**
 * Image classification on the committed fixtures: `tiny-image-classifier` in the ONNX model zoo
 * layout (one graph at the root, synset.txt, no config.json: the model zoo recipe applies) and
 * `tiny-vit-classifier` in the transformers layout (id2label, ViT preprocessor_config.json, a
 * graph that already ends in a softmax). Both are nearest-colour classifiers, so solid colours
 * give meaningful labels, and expected scores are recomputed from the fixtures' weights.
 */

const ZOO = fixtureDir('tiny-image-classifier');
const VIT = fixtureDir('tiny-vit-classifier');
const zooWeights = loadImageWeights('tiny-image-classifier');
const vitWeights = loadImageWeights('tiny-vit-classifier');
const COLOURS: readonly { name: string; rgb: [number, number, number] }[] = [
  { name: 'red', rgb: [255, 0, 0] },
  { name: 'green', rgb: [0, 255, 0] },
  { name: 'blue', rgb: [0, 0, 255] },
  { name: 'white', rgb: [255, 255, 255] },
  { name: 'black', rgb: [0, 0, 0] },
];
const LABELS = COLOURS.map((c) => c.name);
const ATOL = 1e-5;

let engine: InferenceEngine;
let pictures: Uint8Array[];
let scratch: string;
beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'shoal-classifier-'));
  const catalog = parseCatalog({ models: { 'colour-probabilities': { source: ZOO, options: { output: 'probabilities', topK: 2 } } } }, 'test');
  engine = new InferenceEngine({ catalog });
  // Odd sizes on purpose: every picture is resized (shorter side to 36) and center-cropped to 32.
  pictures = await Promise.all(COLOURS.map((c) => png(45, 37, () => c.rgb)));
});
afterAll(async () => {
  await engine.close();
  rmSync(scratch, { recursive: true, force: true });
});

function sortedLabels(probabilities: readonly number[], names: readonly string[]): { label: string; score: number }[] {
  return probabilities.map((score, i) => ({ label: names[i] ?? '', score })).sort((a, b) => b.score - a.score);
}

describe('image-classification family', () => {
  it('detects the model zoo layout: one graph, synset.txt labels, the ImageNet recipe at the graph size', async () => {
    const profile = await engine.profile(ZOO);
    expect(profile.family).toBe('image-classification');
    expect(profile.tokenizer).toBeNull();
    expect(profile.onnx).toEqual({ model: 'tiny-classifier-12.onnx' });
    expect(profile.options).toMatchObject({ input: 'input', scores: 'output', labels: 'synset.txt', imageCost: 5 });
    // 32 / 0.875 = 36.6 → resize the shorter side to 36, crop 32 (224 → 256 → 224 for real models).
    expect(profile.options.preprocessing).toEqual(imagenetRecipe(32));
    expect(imagenetRecipe(224).resize).toEqual({ mode: 'shortest_edge', size: 256 });
  });

  it('detects the transformers layout from ForImageClassification, id2label and preprocessor_config.json', async () => {
    const profile = await engine.profile(VIT);
    expect(profile.family).toBe('image-classification');
    expect(profile.options).toMatchObject({
      input: 'pixel_values',
      scores: 'probabilities',
      labels: 'config.json',
      preprocessing: { resize: { mode: 'exact', width: 32, height: 32 }, resample: 2, mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5] },
    });
  });

  it('extract: top-5 softmax labels by default, synset lines reduced to the human name', async () => {
    const result = await engine.extract({ model: ZOO, items: pictures.map((image, i) => ({ id: LABELS[i] ?? i, image })) });
    result.items.forEach((item, i) => {
      const expected = sortedLabels(softmax(solidOutputs(zooWeights, COLOURS[i]?.rgb ?? [0, 0, 0])), LABELS);
      expect(item.id).toBe(LABELS[i]);
      expect(item.labels?.map((l) => l.label)).toEqual(expected.map((l) => l.label));
      expect(item.labels?.[0]?.label).toBe(LABELS[i]);
      expectAllClose(item.labels?.map((l) => l.score) ?? [], expected.map((l) => l.score), ATOL, `${LABELS[i]} scores`);
    });
  });

  it('extract honours top_k and threshold', async () => {
    const top2 = await engine.extract({ model: ZOO, items: [{ image: pictures[0] ?? new Uint8Array() }], top_k: 2 });
    expect(top2.items[0]?.labels).toHaveLength(2);
    const expected = sortedLabels(softmax(solidOutputs(zooWeights, [255, 0, 0])), LABELS);
    const threshold = ((expected[1]?.score ?? 0) + (expected[2]?.score ?? 0)) / 2;
    const filtered = await engine.extract({ model: ZOO, items: [{ image: pictures[0] ?? new Uint8Array() }], threshold });
    expect(filtered.items[0]?.labels?.map((l) => l.label)).toEqual(expected.slice(0, 2).map((l) => l.label));
  });

  it('encode returns the logits as a dense vector', async () => {
    const result = await engine.encode({ model: ZOO, items: pictures.map((image) => ({ image })) });
    // onnxruntime's float32 AveragePool sums 1024 values of ~2.6: up to ~1e-4 off the exact mean, ×2.6 in the logits.
    result.items.forEach((item, i) => expectAllClose(item.dense ?? [], solidOutputs(zooWeights, COLOURS[i]?.rgb ?? [0, 0, 0]), 5e-4, `${LABELS[i]} logits`));
  });

  it('catalog options: output "probabilities" and a default topK', async () => {
    const encoded = await engine.encode({ model: 'colour-probabilities', items: [{ image: pictures[2] ?? new Uint8Array() }] });
    const probabilities = encoded.items[0]?.dense ?? [];
    expectAllClose(probabilities, softmax(solidOutputs(zooWeights, [0, 0, 255])), ATOL, 'probabilities');
    const extracted = await engine.extract({ model: 'colour-probabilities', items: [{ image: pictures[2] ?? new Uint8Array() }] });
    expect(extracted.items[0]?.labels?.map((l) => l.label)).toEqual(sortedLabels(probabilities, LABELS).slice(0, 2).map((l) => l.label));
  });

  it('a graph that ends in a softmax is not softmaxed twice; labels come from id2label', async () => {
    const result = await engine.extract({ model: VIT, items: [{ image: pictures[0] ?? new Uint8Array() }], top_k: 5 });
    const probabilities = solidOutputs(vitWeights, [255, 0, 0]);
    const expected = sortedLabels(softmax(probabilities), LABELS.map((l) => l.toUpperCase()));
    expect(result.items[0]?.labels?.map((l) => l.label)).toEqual(expected.map((l) => l.label));
    expectAllClose(result.items[0]?.labels?.map((l) => l.score) ?? [], expected.map((l) => l.score), ATOL, 'graph probabilities');
    // A second softmax would flatten them towards 0.2 each.
    expect(result.items[0]?.labels?.[0]?.score).toBeGreaterThan(0.8);
  });

  it('refuses text items and scoring', async () => {
    await expect(engine.extract({ model: ZOO, items: ['a red picture'] })).rejects.toMatchObject({
      code: ErrorCode.UNSUPPORTED_OPERATION,
      message: expect.stringContaining('reads images, not text'),
    });
    await expect(engine.score({ model: ZOO, query: { image: pictures[0] ?? new Uint8Array() }, items: [{ image: pictures[1] ?? new Uint8Array() }] })).rejects.toMatchObject({
      code: ErrorCode.UNSUPPORTED_OPERATION,
    });
  });

  it('a label-file folder whose graph has no image input fails with the inputs it found', async () => {
    const dir = join(scratch, 'not-an-image-model');
    mkdirSync(dir);
    copyFileSync(join(fixtureDir('tiny-bert-mean'), 'onnx', 'model.onnx'), join(dir, 'model.onnx'));
    writeFileSync(join(dir, 'labels.txt'), 'a\nb\n');
    await expect(engine.profile(dir)).rejects.toMatchObject({
      code: ErrorCode.MODEL_LOAD_FAILED,
      message: expect.stringMatching(/model\.onnx has no 4-D float image input .*inputs: input_ids \[\?, \?\]/),
    });
  });
});
