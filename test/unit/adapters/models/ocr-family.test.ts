import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeModel } from '../../../../adapters/models/detect.js';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { builtinModelDir } from '../../../../adapters/sources/builtin-models.js';
import { InferenceEngine } from '../../../../pipelines/inference/engine.js';

/**
 * How an OCR model folder is recognized: the built-in PP-OCRv4 folder as npm ships it, a folder
 * with short names (det.onnx, rec.onnx, no classifier, dict.txt), and a recognizer paired with
 * the wrong charset, which must fail at load rather than read garbage.
 */

const ASSETS = builtinModelDir('paddleocr/pp-ocrv4') ?? '';
const KEYS = readFileSync(join(ASSETS, 'ppocr_keys_v1.txt'), 'utf8');
let root: string;

/** A model folder of links to the built-in graphs under other names, plus a charset file. */
function folder(name: string, graphs: Record<string, string>, charset: string): string {
  const dir = join(root, name);
  mkdirSync(dir);
  for (const [link, target] of Object.entries(graphs)) symlinkSync(join(ASSETS, target), join(dir, link));
  writeFileSync(join(dir, 'dict.txt'), charset);
  return dir;
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'shoal-ocr-family-'));
});
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

describe('OCR model folders', () => {
  it('detects the built-in folder: three stages told apart by file name, the ppocr charset', async () => {
    const { profile, tokenizer } = await describeModel('paddleocr/pp-ocrv4', ASSETS);
    expect(profile.family).toBe('ocr');
    expect(tokenizer).toBeNull();
    expect(profile.options).toEqual({
      components: { det: 'ch_PP-OCRv4_det_infer', rec: 'ch_PP-OCRv4_rec_infer', cls: 'ch_ppocr_mobile_v2.0_cls_infer' },
      charset: 'ppocr_keys_v1.txt',
    });
  });

  it('detects a folder with det.onnx, rec.onnx and dict.txt and no angle classifier', async () => {
    const dir = folder('short', { 'det.onnx': 'ch_PP-OCRv4_det_infer.onnx', 'rec.onnx': 'ch_PP-OCRv4_rec_infer.onnx' }, KEYS);
    const { profile } = await describeModel('short', dir);
    expect(profile.family).toBe('ocr');
    expect(profile.options).toEqual({ components: { det: 'det', rec: 'rec', cls: null }, charset: 'dict.txt' });
  });

  it('refuses at load a recognizer whose charset does not match its output', async () => {
    const dir = folder('wrong-charset', { 'det.onnx': 'ch_PP-OCRv4_det_infer.onnx', 'rec.onnx': 'ch_PP-OCRv4_rec_infer.onnx' }, 'a\nb\nc\n');
    const engine = new InferenceEngine({ runtime: { intraOpThreads: 1 } });
    try {
      await expect(engine.preload(dir)).rejects.toMatchObject({ code: ErrorCode.MODEL_LOAD_FAILED, message: expect.stringMatching(/6625 classes/) });
    } finally {
      await engine.close();
    }
  });
});
