import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as ort from 'onnxruntime-node';
import { calibrationBatch, type CalibrationBatch } from '../../../../adapters/models/precision/calibration.js';
import { describeModel } from '../../../../adapters/models/detect.js';
import { compareOutput } from '../../../../adapters/models/precision/fidelity.js';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { FIXTURES_DIR } from '../../../helpers/shared.js';

/**
 * The fidelity comparison (padding ignored, worst row reported, one-value rows pooled) and the
 * synthetic calibration batch (deterministic, collated like real batches, refused for inputs it
 * cannot make).
 */

const TINY = join(FIXTURES_DIR, 'models', 'tiny-bert-mean');

/** Two rows of three positions; row 0 has one padding position. */
const BATCH: CalibrationBatch = { feeds: {}, batchSize: 2, seqLen: 3, mask: Uint8Array.from([1, 1, 0, 1, 1, 1]) };

const floats = (values: number[], dims: number[]): ort.Tensor => new ort.Tensor('float32', Float32Array.from(values), dims);

describe('compareOutput', () => {
  it('skips padding positions and reports the worst row', () => {
    const reference = floats([1, 0, 0, 1, 9, 9, 1, 0, 0, 1, 1, 1], [2, 3, 2]);
    // Row 0 differs only at its padding position; row 1 has one real position turned around.
    const candidate = floats([1, 0, 0, 1, -9, 4, 1, 0, 0, 1, -1, -1], [2, 3, 2]);
    const result = compareOutput('hidden', reference, candidate, BATCH);
    // Row 1: dot = 1 + 1 - 2 = 0 over norms² 4 and 4.
    expect(result.cosine).toBeCloseTo(0, 12);
    expect(result.maxAbsDiff).toBe(2);
  });

  it('pools rows of a single value (a reranker logit) into one vector', () => {
    const result = compareOutput('logits', floats([1, 2], [2, 1]), floats([1.1, 1.9], [2, 1]), BATCH);
    expect(result.cosine).toBeCloseTo((1.1 + 3.8) / Math.sqrt(5 * (1.21 + 3.61)), 6);
    expect(result.maxAbsDiff).toBeCloseTo(0.1, 6);
  });
});

describe('calibrationBatch', () => {
  it('is deterministic, padded like a real batch, with ids inside the vocabulary', async () => {
    const { profile } = await describeModel('tiny', TINY);
    const first = calibrationBatch(profile, ['input_ids', 'attention_mask', 'token_type_ids'], 187);
    const second = calibrationBatch(profile, ['input_ids', 'attention_mask', 'token_type_ids'], 187);
    expect(first.feeds.input_ids?.data).toEqual(second.feeds.input_ids?.data);
    expect(Object.keys(first.feeds).sort()).toEqual(['attention_mask', 'input_ids', 'token_type_ids']);
    expect(first.batchSize).toBe(6);
    const ids = first.feeds.input_ids?.data;
    if (!(ids instanceof BigInt64Array)) throw new Error('input_ids is not int64');
    const real = [...ids].filter((_, i) => first.mask[i] === 1).map(Number);
    expect(Math.min(...real)).toBeGreaterThanOrEqual(46);
    expect(Math.max(...real)).toBeLessThan(168);
    // Rows are right-padded with the pad id where the mask is 0.
    expect([...ids].filter((_, i) => first.mask[i] === 0).every((id) => id === BigInt(profile.tokenizer?.padId ?? -1))).toBe(true);
  });

  it('refuses a graph whose inputs it cannot synthesize', async () => {
    const { profile } = await describeModel('tiny', TINY);
    expect(() => calibrationBatch(profile, ['input_ids', 'pixel_values'], 187)).toThrow(expect.objectContaining({ code: ErrorCode.MODEL_LOAD_FAILED }));
  });
});
