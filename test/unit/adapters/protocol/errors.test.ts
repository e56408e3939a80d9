import { describe, expect, it } from 'vitest';
import {
  ERROR_TRAITS,
  ErrorCode,
  ShoalError,
  deserializeError,
  hasErrorCode,
  serializeError,
  toShoalError,
} from '../../../../adapters/protocol/errors.js';
import { EncodeRequest, ScoreRequest } from '../../../../adapters/protocol/requests.js';
import { parseWith } from '../../../../adapters/protocol/validate.js';

describe('error codes', () => {
  it('every code has traits, and client errors are never retried', () => {
    for (const code of Object.values(ErrorCode)) expect(ERROR_TRAITS[code]).toBeDefined();
    expect(ERROR_TRAITS.INVALID_INPUT).toEqual({ httpStatus: 422, retryable: false, delivery: 'term' });
    expect(ERROR_TRAITS.OVERLOADED.delivery).toBe('nak');
    expect(ERROR_TRAITS.MODEL_NOT_FOUND.retryable).toBe(false);
  });

  it('round-trips through the wire form with code, details and cause', () => {
    const original = new ShoalError(ErrorCode.MODEL_LOAD_FAILED, 'bad graph', {
      details: { model: 'x' },
      cause: new Error('protobuf parse error'),
    });
    const wire = JSON.parse(JSON.stringify(serializeError(original)));
    expect(wire).toEqual({ code: 'MODEL_LOAD_FAILED', message: 'bad graph', details: { model: 'x' }, cause: 'protobuf parse error' });
    const back = deserializeError(wire);
    expect(back.code).toBe(ErrorCode.MODEL_LOAD_FAILED);
    expect(hasErrorCode(back, ErrorCode.MODEL_LOAD_FAILED)).toBe(true);
    expect(back.traits.httpStatus).toBe(424);
  });

  it('an unknown code from the wire becomes INTERNAL rather than a bogus code', () => {
    expect(deserializeError({ code: 'NOPE' as ErrorCode, message: 'x' }).code).toBe(ErrorCode.INTERNAL);
  });

  it('wraps foreign errors, keeping the cause', () => {
    const wrapped = toShoalError(new TypeError('boom'), ErrorCode.INFERENCE_FAILED);
    expect(wrapped.code).toBe(ErrorCode.INFERENCE_FAILED);
    expect(wrapped.message).toBe('boom');
    expect(wrapped.cause).toBeInstanceOf(TypeError);
  });
});

describe('request schemas', () => {
  it('accepts string shorthand for items and keeps ids', () => {
    const parsed = parseWith(EncodeRequest, { model: 'm', items: ['a', { id: 7, text: 'b', role: 'query' }] }, 'encode request');
    expect(parsed.items).toEqual([{ text: 'a' }, { id: 7, text: 'b', role: 'query' }]);
  });

  it('names every bad field in one INVALID_INPUT error', () => {
    let caught: unknown;
    try {
      parseWith(EncodeRequest, { model: '', items: [], output_types: ['dense', 'bogus'], extra: 1 }, 'encode request');
    } catch (error) {
      caught = error;
    }
    expect(hasErrorCode(caught, ErrorCode.INVALID_INPUT)).toBe(true);
    const message = caught instanceof Error ? caught.message : '';
    expect(message).toContain('model');
    expect(message).toContain('items: items must not be empty');
    expect(message).toContain('output_types.1');
    expect(message).toContain('extra');
  });

  it('rejects texts over the size limit and unknown item keys', () => {
    expect(() => parseWith(ScoreRequest, { model: 'm', query: 'q', items: [{ text: 'x', foo: 1 }] }, 'score request')).toThrow(/foo/);
    expect(() => parseWith(EncodeRequest, { model: 'm', items: ['x'.repeat(1_000_001)] }, 'encode request')).toThrow(/longer than/);
  });
});
