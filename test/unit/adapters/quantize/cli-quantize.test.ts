import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { readOnnx } from '../../../../adapters/quantize/index.js';
import { DataType } from '../../../../adapters/quantize/onnx-file.js';
import { parseCatalog } from '../../../../pipelines/inference/catalog.js';
import { InferenceEngine } from '../../../../pipelines/inference/engine.js';
import { CliApp } from '../../../../services/cli/app.js';
import { buildProgram } from '../../../../services/cli/program.js';
import { CONFORMANCE_DIR, FIXTURES_DIR, sharedAvailable } from '../../../helpers/shared.js';

/**
 * `shoal models quantize` on the real command tree (registered by commands/models.ts):
 * sizes and fidelity printed, `--out` writes a model folder that loads as a shipped int8 graph,
 * and a refused model exits with an error and writes nothing.
 */

const TINY = join(FIXTURES_DIR, 'models', 'tiny-bert-mean');

let root: string;
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'shoal-cli-quantize-'));
});
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

class Collect extends Writable {
  text = '';
  override _write(chunk: Buffer, _encoding: string, done: () => void): void {
    this.text += chunk.toString();
    done();
  }
}

async function shoal(args: string[]): Promise<{ stdout: string; error: unknown }> {
  const stdout = new Collect();
  const stderr = new Collect();
  const app = new CliApp({ stdin: new PassThrough(), stdout, stderr, env: { SHOAL_THREADS: '1', SHOAL_CACHE_DIR: join(root, 'cache') }, signal: new AbortController().signal });
  const program = await buildProgram(app);
  const models = program.commands.find((command) => command.name() === 'models');
  if (models === undefined) throw new Error('no models command');
  expect(models.commands.map((command) => command.name())).toContain('quantize');
  try {
    await program.parseAsync(['node', 'shoal', ...args]);
    return { stdout: stdout.text, error: null };
  } catch (error) {
    return { stdout: stdout.text, error };
  }
}

describe('shoal models quantize', () => {
  it('prints sizes and the fidelity check, and --out writes a folder that loads as shipped int8', async () => {
    const out = join(root, 'tiny-int8');
    const { stdout, error } = await shoal(['models', 'quantize', TINY, '--min-weight-elements', '0', '--out', out]);
    expect(error).toBeNull();
    expect(stdout).toMatch(/^model .*tiny-bert-mean/);
    expect(stdout).toMatch(/model \(onnx\/model\.onnx\): int8, quantized \(built now\)/);
    expect(stdout).toMatch(/size: [\d.]+ MB -> [\d.]+ MB \([\d.]+x\), 2 MatMul\/Gemm nodes in int8/);
    expect(stdout).toMatch(/fidelity: min cosine\(fp32, int8\) 0\.99\d+, floor 0\.99: passed/);
    expect(stdout).toMatch(/last_hidden_state: cosine 0\.99\d+/);
    for (const file of ['onnx/model_quantized.onnx', 'config.json', 'tokenizer.json', 'modules.json', '1_Pooling/config.json']) {
      expect(existsSync(join(out, file)), file).toBe(true);
    }
    expect(existsSync(join(out, 'onnx', 'model.onnx'))).toBe(false);
    // --out writes portable weights: uint8 with zero point 128, exact on every CPU (int8-weights.ts).
    const written = (await readOnnx(join(out, 'onnx', 'model_quantized.onnx'))).model;
    const codes = written.graph?.initializer?.filter((t) => t.name?.endsWith('_int8')) ?? [];
    expect(codes.length).toBeGreaterThan(0);
    expect(codes.every((t) => t.dataType === DataType.UINT8)).toBe(true);

    const models = { copy: { source: out, precision: 'int8' }, plain: { source: out } };
    const engine = new InferenceEngine({ catalog: parseCatalog({ models }, 'cli test'), runtime: { intraOpThreads: 1 } });
    try {
      expect((await engine.inspect('copy')).info.precision?.model).toMatchObject({ effective: 'int8', origin: 'shipped int8 graph' });
      // Without `precision: int8` the folder's only graph still runs, and is reported as the int8 graph it is.
      expect((await engine.inspect('plain')).info.precision?.model).toMatchObject({ requested: 'fp32', effective: 'int8', origin: 'shipped int8 graph' });
    } finally {
      await engine.close();
    }
  });

  it('--json reports the cached graph on a second run (same weight storage: --out wrote portable uint8)', async () => {
    const { stdout, error } = await shoal(['models', 'quantize', TINY, '--min-weight-elements', '0', '--weights', 'uint8', '--json']);
    expect(error).toBeNull();
    const report: unknown = JSON.parse(stdout);
    expect(report).toMatchObject({ components: { model: { file: 'onnx/model.onnx', effective: 'int8', origin: 'quantized (cached)' } }, out: null, written: [] });
  });

  it('a model the fidelity gate refuses fails with MODEL_LOAD_FAILED and writes nothing', async () => {
    const out = join(root, 'refused');
    const { stdout, error } = await shoal(['models', 'quantize', TINY, '--min-weight-elements', '0', '--min-cosine', '1.5', '--out', out]);
    expect(error).toMatchObject({ code: ErrorCode.MODEL_LOAD_FAILED, message: expect.stringContaining('int8 refused') });
    expect(stdout).toMatch(/floor 1\.5: REFUSED/);
    expect(existsSync(out)).toBe(false);
  });

  const kit = join(CONFORMANCE_DIR, 'bert-mean-embed');
  it.skipIf(!sharedAvailable(kit))('--merge-projections --fuse-attention: the written graph has one Q/K/V node and one MultiHeadAttention per layer', async () => {
    const out = join(root, 'kit-rewritten');
    const { stdout, error } = await shoal(['models', 'quantize', kit, '--min-weight-elements', '0', '--merge-projections', '--fuse-attention', '--out', out]);
    expect(error).toBeNull();
    expect(stdout).toMatch(/fidelity: .*: passed/);
    const nodes = (await readOnnx(join(out, 'onnx', 'model_quantized.onnx'))).model.graph?.node ?? [];
    const count = (op: string): number => nodes.filter((n) => n.opType === op).length;
    // The kit model has 2 layers: one attention block and one Q/K/V Split each.
    expect(count('MultiHeadAttention')).toBe(2);
    expect(count('Softmax')).toBe(0);
    expect(count('Split')).toBe(2);
  });
});
