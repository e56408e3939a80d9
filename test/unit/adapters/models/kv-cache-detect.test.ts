import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import onnxProto from 'onnx-proto';
import { afterAll, describe, expect, it } from 'vitest';
import { detectPastInputs } from '../../../../adapters/models/kv-cache-detect.js';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';

/**
 * KV-cache inputs are fed as empty tensors whose dtype and head axes come from the graph, and
 * from config.json where the export left them symbolic. The graphs here declare inputs only:
 * detection reads the declarations, never the nodes.
 */

const { onnx } = onnxProto;
const dir = mkdtempSync(join(tmpdir(), 'shoal-kv-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Dim = number | string;

function graphFile(name: string, inputs: { name: string; elemType: number; dims: Dim[] }[]): string {
  const model = onnx.ModelProto.create({
    irVersion: 8,
    opsetImport: [{ domain: '', version: 14 }],
    graph: {
      name: 'g',
      input: inputs.map((input) => ({
        name: input.name,
        type: { tensorType: { elemType: input.elemType, shape: { dim: input.dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) } } },
      })),
    },
  });
  const path = join(dir, `${name}.onnx`);
  writeFileSync(path, onnx.ModelProto.encode(model).finish());
  return path;
}

const IDS = { name: 'input_ids', elemType: 7, dims: ['batch', 'seq'] };

describe('KV-cache input detection', () => {
  it('takes heads and head_dim from the graph, not hidden/heads (Qwen3: explicit head_dim)', async () => {
    const path = graphFile('fixed', [
      IDS,
      { name: 'past_key_values.0.key', elemType: 1, dims: ['batch', 1, 'past', 16] },
      { name: 'past_key_values.0.value', elemType: 1, dims: ['batch', 1, 'past', 16] },
    ]);
    const found = await detectPastInputs(path, { hidden_size: 16, num_attention_heads: 2 });
    expect(found).toEqual([
      { name: 'past_key_values.0.key', dtype: 'float32', heads: 1, headDim: 16 },
      { name: 'past_key_values.0.value', dtype: 'float32', heads: 1, headDim: 16 },
    ]);
  });

  it('falls back to config.json num_key_value_heads and head_dim when the axes are symbolic; float16 kept', async () => {
    const path = graphFile('symbolic', [IDS, { name: 'past_key_values.3.key', elemType: 10, dims: ['batch', 'kv', 'past', 'hd'] }]);
    const found = await detectPastInputs(path, { hidden_size: 1024, num_attention_heads: 16, num_key_value_heads: 8, head_dim: 128 });
    expect(found).toEqual([{ name: 'past_key_values.3.key', dtype: 'float16', heads: 8, headDim: 128 }]);
    // Without head_dim, hidden / heads.
    expect(await detectPastInputs(path, { hidden_size: 1024, num_attention_heads: 16 })).toEqual([
      { name: 'past_key_values.3.key', dtype: 'float16', heads: 16, headDim: 64 },
    ]);
  });

  it('a graph without a cache has no past inputs; undeclared dims are refused by name', async () => {
    expect(await detectPastInputs(graphFile('plain', [IDS]), undefined)).toEqual([]);
    const path = graphFile('unknown', [IDS, { name: 'past_key_values.0.key', elemType: 1, dims: ['batch', 'kv', 'past', 'hd'] }]);
    await expect(detectPastInputs(path, undefined)).rejects.toMatchObject({ code: ErrorCode.MODEL_LOAD_FAILED, message: expect.stringContaining('past_key_values.0.key') });
  });
});
