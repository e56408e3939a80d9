import { describe, expect, it } from 'vitest';
import { ErrorCode, hasErrorCode } from '../../../../adapters/protocol/errors.js';
import { DEFAULT_PARSE_OPTIONS, resolveParseOptions } from '../../../../pipelines/documents/document.js';

describe('parse options', () => {
  it('fills the documented defaults and freezes the result without touching the input', () => {
    const input = { ocr: 'never' as const, maxPages: 10 };
    const options = resolveParseOptions(input);
    expect(options).toEqual({ ...DEFAULT_PARSE_OPTIONS, ocr: 'never', maxPages: 10 });
    expect(DEFAULT_PARSE_OPTIONS).toMatchObject({ ocr: 'auto', ocrModel: 'paddleocr/pp-ocrv4', ocrDpi: 150 });
    expect(Object.isFrozen(options)).toBe(true);
    expect(input).toEqual({ ocr: 'never', maxPages: 10 });
  });

  it('treats undefined as unset and keeps a signal and callback', () => {
    const controller = new AbortController();
    const onPage = (): void => undefined;
    const options = resolveParseOptions({ ocrDpi: undefined, signal: controller.signal, onPage });
    expect(options.ocrDpi).toBe(150);
    expect(options.signal).toBe(controller.signal);
    expect(options.onPage).toBe(onPage);
  });

  it('rejects bad values with CONFIG_INVALID naming the field', () => {
    let caught: unknown;
    try {
      resolveParseOptions({ ocrDpi: 5, maxBytes: -1 });
    } catch (error) {
      caught = error;
    }
    expect(hasErrorCode(caught, ErrorCode.CONFIG_INVALID)).toBe(true);
    expect(String(caught)).toMatch(/ocrDpi/);
    expect(String(caught)).toMatch(/maxBytes/);
  });
});
