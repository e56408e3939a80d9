import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { decodeOnnx, onnx } from '../../../../adapters/quantize/onnx-file.js';
import { LAST_TOKEN_OUTPUT, rewriteLastTokenLogits } from '../../../../adapters/quantize/last-token-logits.js';
import { ort } from '../../../../adapters/runtime/ort-session.js';
import { conformanceSuite, type ConformanceModel } from '../../../helpers/conformance.js';

/**
 * The reranker's load-time rewrite checked against the untouched graph on the kit's cases: the
 * same feeds (the case's model_inputs, empty KV cache) through both, the rewritten graph's
 * [batch, 2] against the original's logits at the last position, columns (no, yes). Also with
 * right padding (the last real token is not the last column) and with a head the rewrite cannot
 * cut (a bias Add after the MatMul: the columns are gathered after the head instead).
 */

const NO = 2152;
const YES = 9693;
const ModelInputs = z.looseObject({ input_ids: z.array(z.array(z.number())), attention_mask: z.array(z.array(z.number())), position_ids: z.array(z.array(z.number())) });

function int64(rows: number[][]): ort.Tensor {
  return new ort.Tensor('int64', BigInt64Array.from(rows.flat(), (v) => BigInt(v)), [rows.length, rows[0]?.length ?? 0]);
}

function feeds(session: ort.InferenceSession, inputs: z.infer<typeof ModelInputs>): Record<string, ort.Tensor> {
  const batch = inputs.input_ids.length;
  const out: Record<string, ort.Tensor> = { input_ids: int64(inputs.input_ids), attention_mask: int64(inputs.attention_mask), position_ids: int64(inputs.position_ids) };
  for (const name of session.inputNames) if (name.startsWith('past_key_values.')) out[name] = new ort.Tensor('float32', new Float32Array(0), [batch, 1, 0, 16]);
  return out;
}

/** Original logits [b, s, V] at (row, column) for the two answer ids. */
function answerLogits(logits: ort.Tensor, row: number, column: number): [number, number] {
  const [, seq = 0, vocab = 0] = logits.dims;
  const data = logits.data as Float32Array;
  const base = (row * seq + column) * vocab;
  return [data[base + NO] ?? Number.NaN, data[base + YES] ?? Number.NaN];
}

/** Moves each row's padding to the right: same tokens and positions, the last real token mid-row. */
function rightPadded(inputs: z.infer<typeof ModelInputs>): z.infer<typeof ModelInputs> {
  const move = (rows: number[][], fill: (row: number) => number): number[][] =>
    rows.map((row, r) => {
      const mask = inputs.attention_mask[r] ?? [];
      const real = row.filter((_, i) => mask[i] === 1);
      return [...real, ...new Array<number>(row.length - real.length).fill(fill(r))];
    });
  return {
    input_ids: move(inputs.input_ids, () => 151643),
    attention_mask: move(inputs.attention_mask, () => 0),
    position_ids: move(inputs.position_ids, () => 1),
  };
}

function rewriteSuite(model: ConformanceModel): void {
  const path = join(model.dir, 'onnx/model.onnx');
  let original: ort.InferenceSession;
  let sliced: ort.InferenceSession;
  let gathered: ort.InferenceSession;
  const reports: unknown[] = [];

  beforeAll(async () => {
    const bytes = readFileSync(path);
    original = await ort.InferenceSession.create(path);
    const plain = decodeOnnx(bytes, path);
    reports.push(rewriteLastTokenLogits(plain, { logits: 'logits', columns: [NO, YES] }));
    sliced = await ort.InferenceSession.create(onnx.ModelProto.encode(plain).finish());
    // A head the rewrite cannot cut: logits = MatMul(...) + 0 (a bias Add of a zero vector).
    const biased = decodeOnnx(bytes, path);
    const graph = biased.graph ?? {};
    const head = (graph.node ?? []).find((n) => n.output?.[0] === 'logits');
    if (head === undefined) throw new Error('kit graph has no logits node');
    head.output = ['logits_before_bias'];
    graph.initializer?.push({ name: 'lm_bias', dataType: 1, dims: [151936], rawData: new Uint8Array(151936 * 4) });
    graph.node?.push({ opType: 'Add', input: ['logits_before_bias', 'lm_bias'], output: ['logits'], name: 'bias_add' });
    reports.push(rewriteLastTokenLogits(biased, { logits: 'logits', columns: [NO, YES] }));
    gathered = await ort.InferenceSession.create(onnx.ModelProto.encode(biased).finish());
  });
  afterAll(async () => {
    await Promise.all([original?.release(), sliced?.release(), gathered?.release()]);
  });

  it('cuts the head to two columns, keeps the inputs, returns one [batch, 2] output, prunes the LM head and present.*', () => {
    expect(reports[0]).toMatchObject({ head: 'sliced', headOp: 'MatMul' });
    expect(reports[0]).toMatchObject({ initializersDropped: expect.any(Number) });
    expect(reports[1]).toMatchObject({ head: 'gathered' });
    expect(sliced.inputNames).toEqual(original.inputNames);
    expect(sliced.outputNames).toEqual([LAST_TOKEN_OUTPUT]);
    expect(gathered.outputNames).toEqual([LAST_TOKEN_OUTPUT]);
  });

  for (const kase of model.cases.cases) {
    const inputs = ModelInputs.parse(kase.model_inputs);
    it(`${kase.id}: the rewritten graphs give the untouched graph's last-token no/yes logits (left and right padding)`, async () => {
      for (const batch of [inputs, rightPadded(inputs)]) {
        const full = (await original.run(feeds(original, batch))).logits;
        if (full === undefined) throw new Error('no logits');
        const want = batch.attention_mask.map((mask, row) => answerLogits(full, row, mask.lastIndexOf(1)));
        for (const session of [sliced, gathered]) {
          const got = (await session.run(feeds(session, batch)))[LAST_TOKEN_OUTPUT];
          expect(got?.dims).toEqual([batch.input_ids.length, 2]);
          const data = Array.from(got?.data as Float32Array);
          want.forEach(([no, yes], row) => {
            expect(Math.abs((data[row * 2] ?? Number.NaN) - no)).toBeLessThanOrEqual(1e-5);
            expect(Math.abs((data[row * 2 + 1] ?? Number.NaN) - yes)).toBeLessThanOrEqual(1e-5);
          });
        }
      }
    });
  }
}

describe('last-token logits rewrite', () => {
  conformanceSuite('qwen3-reranker', rewriteSuite);
});
