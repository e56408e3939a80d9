import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { POOLED_OUTPUT } from '../../../../adapters/models/splade/splade.js';
import { readOnnx, serializeOnnx } from '../../../../adapters/quantize/onnx-file.js';
import { rewriteSpladePooling, SPLADE_WEIGHTS_OUTPUT, type SpladePoolingOptions } from '../../../../adapters/quantize/splade-pooling.js';
import { CONFORMANCE_DIR, missingReason, sharedAvailable } from '../../../helpers/shared.js';

/**
 * SpladePooling appended to the kit's SPLADE graph (BertForMaskedLM export, opset 14, vocabulary
 * 30,522, random weights), run by onnxruntime on a padded batch: its [batch, vocab] output must
 * be the original logits pooled as splade.ts pools them in JavaScript — relu, padding left out,
 * max or sum over the sequence, log1p once or twice.
 */

const GRAPH = join(CONFORMANCE_DIR, 'bert-splade', 'onnx', 'model.onnx');
const available = sharedAvailable(CONFORMANCE_DIR);

/** Two rows: 6 real tokens, and 3 real + 3 padding (ids from BERT's vocabulary). */
const IDS = [
  [101, 1996, 4937, 2938, 2006, 102],
  [101, 3869, 102, 0, 0, 0],
];
const MASK = [
  [1, 1, 1, 1, 1, 1],
  [1, 1, 1, 0, 0, 0],
];

function feeds(): Record<string, ort.Tensor> {
  const dims = [IDS.length, IDS[0]?.length ?? 0];
  const int64 = (rows: number[][]): ort.Tensor => new ort.Tensor('int64', BigInt64Array.from(rows.flat(), (v) => BigInt(v)), dims);
  return { input_ids: int64(IDS), attention_mask: int64(MASK), token_type_ids: int64(IDS.map((row) => row.map(() => 0))) };
}

async function run(bytes: Uint8Array | string): Promise<ort.Tensor> {
  const session = typeof bytes === 'string' ? await ort.InferenceSession.create(bytes) : await ort.InferenceSession.create(bytes);
  try {
    const out = await session.run(feeds());
    const name = session.outputNames[0] ?? '';
    const tensor = out[name];
    if (tensor === undefined) throw new Error('no output');
    return tensor;
  } finally {
    await session.release();
  }
}

/** splade.ts's pooling, written out: the reference. */
function poolHere(logits: Float32Array, vocab: number, rule: Pick<SpladePoolingOptions, 'pooling' | 'activation'>, masks: number[][] = MASK): Float32Array[] {
  const activate = (x: number): number => (rule.activation === 'relu' ? Math.log1p(x) : Math.log1p(Math.log1p(x)));
  return masks.map((mask, row) => {
    const weights = new Float32Array(vocab);
    mask.forEach((real, t) => {
      if (real !== 1) return;
      for (let v = 0; v < vocab; v++) {
        const x = Math.max(0, logits[(row * mask.length + t) * vocab + v] ?? 0);
        weights[v] = rule.pooling === 'max' ? Math.max(weights[v] ?? 0, x) : (weights[v] ?? 0) + activate(x);
      }
    });
    return rule.pooling === 'max' ? weights.map(activate) : weights;
  });
}

describe('SPLADE pooling inside the graph (splade-pooling.ts)', () => {
  if (!available) {
    it.skip(missingReason(CONFORMANCE_DIR), () => undefined);
    return;
  }

  it('names its output as the family reads it', () => {
    expect(SPLADE_WEIGHTS_OUTPUT).toBe(POOLED_OUTPUT);
  });

  for (const rule of [
    { pooling: 'max', activation: 'relu' },
    { pooling: 'sum', activation: 'log1p_relu' },
  ] as const) {
    it(`${rule.pooling} / ${rule.activation}: [batch, vocab] weights equal to the logits pooled in JavaScript, padding left out`, async () => {
      const logits = await run(GRAPH);
      const vocab = logits.dims[2] ?? 0;
      expect(vocab).toBe(30_522);
      const expected = poolHere(logits.data as Float32Array, vocab, rule);

      const { model } = await readOnnx(GRAPH);
      const report = rewriteSpladePooling(model, { logits: null, mask: 'attention_mask', ...rule });
      expect(report).toEqual({ pooled: true, logits: 'logits' });
      const pooled = await run(serializeOnnx(model, 'unused').graph);
      expect(pooled.dims).toEqual([2, vocab]);
      const data = pooled.data as Float32Array;
      let worst = 0;
      let active = 0;
      expected.forEach((row, r) =>
        row.forEach((w, v) => {
          worst = Math.max(worst, Math.abs((data[r * vocab + v] ?? Number.NaN) - w));
          if (w > 0) active++;
        }),
      );
      expect(worst).toBeLessThan(1e-5);
      expect(active).toBeGreaterThan(100);
      // The mask is what keeps the padding out: pooled over all six positions, row 2 differs.
      const unmasked = poolHere(logits.data as Float32Array, vocab, rule, MASK.map((row) => row.map(() => 1)))[1] ?? new Float32Array();
      expect(unmasked.some((w, v) => Math.abs(w - (data[vocab + v] ?? 0)) > 1e-3)).toBe(true);
    });
  }

  it('leaves the graph alone when the configured output or the mask input is missing', async () => {
    const { model } = await readOnnx(GRAPH);
    expect(rewriteSpladePooling(model, { logits: 'nope', mask: 'attention_mask', pooling: 'max', activation: 'relu' })).toMatchObject({ pooled: false, reason: 'no output "nope"' });
    expect(rewriteSpladePooling(model, { logits: null, mask: 'mask', pooling: 'max', activation: 'relu' })).toMatchObject({ pooled: false, reason: 'no input "mask"' });
    expect(model.graph?.output?.map((output) => output.name)).toEqual(['logits']);
  });
});
