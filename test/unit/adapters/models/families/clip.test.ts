import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InferenceEngine } from '../../../../../pipelines/inference/engine.js';
import { expectAllClose } from '../../../../helpers/conformance.js';
import { imageOutputs, loadImageWeights, png, quadrant, rgbPixels } from '../../../../helpers/tiny-image-model.js';
import { cosine, hiddenStates, l2Normalize, loadTinyModel, matVec } from '../../../../helpers/tiny-model.js';

/**
 * CLIP family on the committed fixture tiny-clip (config.json CLIPModel, text_model.onnx +
 * vision_model.onnx, 32 × 32 images in 16 × 16 patches, max 16 tokens). Every expected vector is
 * recomputed from the fixture's weights, so the tests hold on a machine without the shared kit.
 */

const model = loadTinyModel('tiny-clip');
const vision = loadImageWeights('tiny-clip');
const ATOL = 2e-5;

function textEmbedding(tokens: readonly string[]): number[] {
  if (model.weights.head.kind !== 'first') throw new Error('tiny-clip text head');
  const head = model.weights.head;
  const h0 = hiddenStates(model, { ids: model.ids(tokens) })[0] ?? [];
  return l2Normalize(matVec(h0, head.weights).map((v, j) => v + (head.bias[j] ?? 0)));
}

const RED_CAT = ['<s>', 'a', 'Ġred', 'Ġcat', '</s>'];
const BLUE_HOUSE = ['<s>', 'the', 'Ġblue', 'Ġhouse', '</s>'];
const upright = rgbPixels(32, 32, (x, y) => quadrant(x, y));
const imageEmbedding = l2Normalize(imageOutputs(vision, upright));
/** The same picture turned by 180°: same colours, other places. */
const turned = l2Normalize(imageOutputs(vision, rgbPixels(32, 32, (x, y) => quadrant(31 - x, 31 - y))));

let engine: InferenceEngine;
let quadrantPng: Uint8Array;
beforeAll(async () => {
  engine = new InferenceEngine();
  quadrantPng = await png(32, 32, (x, y) => quadrant(x, y));
});
afterAll(async () => {
  await engine.close();
});

describe('clip family: tiny-clip', () => {
  it('is detected from config.json with the preprocessor_config.json recipe and ViT cost', async () => {
    const profile = await engine.profile(model.dir);
    expect(profile.family).toBe('clip');
    expect(profile.onnx).toEqual({ text_model: 'onnx/text_model.onnx', vision_model: 'onnx/vision_model.onnx' });
    expect(profile.maxLength).toBe(16);
    // (32 / 16)² patches + the class token.
    expect(profile.options).toMatchObject({ imageCost: 5, preprocessing: { resize: { mode: 'shortest_edge', size: 32 }, resample: 3, crop: { width: 32, height: 32 } } });
  });

  it('encodes texts with the text graph, L2-normalized', async () => {
    const tokenized = await engine.tokenize({ model: model.dir, items: ['a red cat'] });
    expect(tokenized.items[0]?.tokens).toEqual(RED_CAT);
    const result = await engine.encode({ model: model.dir, items: ['a red cat', 'the blue house'] });
    expectAllClose(result.items[0]?.dense ?? [], textEmbedding(RED_CAT), ATOL, 'red cat');
    expectAllClose(result.items[1]?.dense ?? [], textEmbedding(BLUE_HOUSE), ATOL, 'blue house');
  });

  it('encodes images with the vision graph; where colours are matters', async () => {
    const result = await engine.encode({ model: model.dir, items: [{ image: quadrantPng }] });
    expectAllClose(result.items[0]?.dense ?? [], imageEmbedding, ATOL, 'quadrants');
    expect(cosine(imageEmbedding, turned)).toBeLessThan(0.9);
    expect(result.usage.tokens).toBe(5);
  });

  it('normalize: false returns the projections as the graphs give them', async () => {
    const result = await engine.encode({ model: model.dir, items: [{ image: quadrantPng }], normalize: false });
    expectAllClose(result.items[0]?.dense ?? [], imageOutputs(vision, upright), ATOL, 'raw image embedding');
  });

  it('a mixed batch keeps input order and matches single-kind requests', async () => {
    const result = await engine.encode({ model: model.dir, items: ['a red cat', { image: quadrantPng }, 'the blue house', { image: quadrantPng }] });
    const expected = [textEmbedding(RED_CAT), imageEmbedding, textEmbedding(BLUE_HOUSE), imageEmbedding];
    result.items.forEach((item, i) => {
      expect(item.index).toBe(i);
      expectAllClose(item.dense ?? [], expected[i] ?? [], ATOL, `item ${i}`);
    });
    expect(result.usage.tokens).toBe(5 + 5 + 5 + 5);
  });

  it('scores a text query against images and an image query against texts by cosine', async () => {
    const turnedPng = await png(32, 32, (x, y) => quadrant(31 - x, 31 - y));
    const textToImages = await engine.score({ model: model.dir, query: 'a red cat', items: [{ image: quadrantPng }, { image: turnedPng }] });
    const query = textEmbedding(RED_CAT);
    const wanted = [cosine(query, imageEmbedding), cosine(query, turned)];
    for (const s of textToImages.scores) expect(Math.abs(s.score - (wanted[s.index] ?? Number.NaN))).toBeLessThanOrEqual(ATOL);
    expect(textToImages.scores.map((s) => s.index)).toEqual((wanted[0] ?? 0) > (wanted[1] ?? 0) ? [0, 1] : [1, 0]);

    const imageToTexts = await engine.score({ model: model.dir, query: { image: quadrantPng }, items: ['a red cat', 'the blue house'], top_k: 1 });
    const both = [cosine(imageEmbedding, textEmbedding(RED_CAT)), cosine(imageEmbedding, textEmbedding(BLUE_HOUSE))];
    const best = (both[0] ?? 0) >= (both[1] ?? 0) ? 0 : 1;
    expect(imageToTexts.scores).toHaveLength(1);
    expect(imageToTexts.scores[0]?.index).toBe(best);
    expect(Math.abs((imageToTexts.scores[0]?.score ?? 0) - (both[best] ?? 0))).toBeLessThanOrEqual(ATOL);
  });

  it('applies EXIF orientation: a JPEG stored turned with orientation 6 encodes like the upright picture', async () => {
    // Orientation 6 = "turn 90° clockwise to display": store the picture turned 90° counter-clockwise.
    const stored = await sharp(Buffer.from(upright), { raw: { width: 32, height: 32, channels: 3 } })
      .rotate(270)
      .jpeg({ quality: 100, chromaSubsampling: '4:4:4' })
      .withMetadata({ orientation: 6 })
      .toBuffer();
    const ignored = await sharp(stored).jpeg({ quality: 100, chromaSubsampling: '4:4:4' }).toBuffer(); // orientation dropped, pixels as stored
    const result = await engine.encode({ model: model.dir, items: [{ image: new Uint8Array(stored) }, { image: new Uint8Array(ignored) }] });
    const oriented = result.items[0]?.dense ?? [];
    expect(cosine(oriented, imageEmbedding)).toBeGreaterThan(0.9999);
    expect(cosine(result.items[1]?.dense ?? [], imageEmbedding)).toBeLessThan(0.95);
  });
});
