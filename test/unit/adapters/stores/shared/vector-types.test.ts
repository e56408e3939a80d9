import { describe, expect, it } from 'vitest';
import { vectorShape } from '../../../../../adapters/nats/jobs/part-results.js';
import { ErrorCode } from '../../../../../adapters/protocol/errors.js';
import { checkSpec, StoredSpec } from '../../../../../adapters/stores/shared/table-spec.js';
import { checkVectorType, fromFlatVector, hammingDistance, hammingScore, packBits, toFlatVector, unpackBits } from '../../../../../adapters/stores/shared/vector-types.js';
import { parseDefinition } from '../../../../../pipelines/documents/definition.js';
import { settingsHash } from '../../../../../pipelines/documents/identity.js';
import { queryShape } from '../../../../../pipelines/documents/search.js';
import { referencePackbits, unitVectors } from '../../../../helpers/reference-quantize.js';

/** How sinks handle output types (adapters/stores/shared/vector-types.ts), specs stored before them, and the pipeline's encode settings. */

describe('binary vector forms', () => {
  const [a = [], b = []] = unitVectors(2, 21, 5);
  const bitsOf = (v: readonly number[]): number[] => v.slice(0, 21).map((x) => (x > 0 ? 1 : 0));

  it('unpacks and packs sign bits as numpy packbits does (first dimension in the high bit, last byte zero-padded)', () => {
    const packed = referencePackbits(a);
    expect(packed).toHaveLength(3);
    expect(unpackBits(packed, 'ubinary')).toEqual([...bitsOf(a), 0, 0, 0]);
    expect(packBits(bitsOf(a), 'ubinary')).toEqual(packed);
    expect(packBits(bitsOf(a), 'binary')).toEqual(packed.map((byte) => byte - 128));
    expect(unpackBits(packed.map((byte) => byte - 128), 'binary')).toEqual([...bitsOf(a), 0, 0, 0]);
    expect(fromFlatVector(toFlatVector(packed, 'ubinary'), 'ubinary')).toEqual(packed);
    expect(toFlatVector([0.5, -1], 'float16')).toEqual([0.5, -1]);
  });

  it('counts differing bits and scores them as the cosine of the ±1 sign vectors', () => {
    const differ = bitsOf(a).filter((bit, i) => bit !== bitsOf(b)[i]).length;
    expect(differ).toBeGreaterThan(0);
    expect(hammingDistance(referencePackbits(a), referencePackbits(b), 'ubinary')).toBe(differ);
    expect(hammingDistance(referencePackbits(a).map((x) => x - 128), referencePackbits(b).map((x) => x - 128), 'binary')).toBe(differ);
    const signs = (v: readonly number[]): number[] => [...bitsOf(v), 0, 0, 0].map((bit) => (bit === 1 ? 1 : -1));
    const cosine = signs(a).reduce((sum, x, i) => sum + x * (signs(b)[i] ?? 0), 0) / 24;
    expect(hammingScore(differ, 24)).toBeCloseTo(cosine, 12);
  });
});

describe('vector type checks', () => {
  it('accepts the values of each type and names the first value that does not fit', () => {
    expect(() => checkVectorType([0.1, -3e38], 'float32', 'v')).not.toThrow();
    expect(() => checkVectorType([0.5, 0.0999755859375, 65504], 'float16', 'v')).not.toThrow();
    expect(() => checkVectorType([0.5, 0.1], 'float16', 'v')).toThrow(/value 0.1 at 1/);
    expect(() => checkVectorType([-128, 127], 'int8', 'v')).not.toThrow();
    expect(() => checkVectorType([128], 'int8', 'v')).toThrow(expect.objectContaining({ code: ErrorCode.INVALID_INPUT }));
    expect(() => checkVectorType([0, 255], 'ubinary', 'v')).not.toThrow();
    expect(() => checkVectorType([0.5], 'uint8', 'the query vector')).toThrow('the query vector is not a uint8 vector (value 0.5 at 0); the index stores uint8 vectors');
  });

  it('reads a spec stored before output types as float32 and refuses another type by name', () => {
    const old = StoredSpec.parse({ dimension: 384, distance: 'cosine', optionalColumns: [], metadata: { model: 'm' } });
    expect(old.vectorType).toBe('float32');
    expect(() => checkSpec(old, { ...old, vectorType: 'float32' }, 'table t')).not.toThrow();
    expect(() => checkSpec(old, { ...old, dimension: 48, vectorType: 'ubinary' }, 'table t')).toThrow(
      'table t has dimension 384 (the encoder gives 48), float32 vectors (the pipeline asks ubinary); use another --table or --index',
    );
  });
});

describe('output types in the pipeline and on the wire', () => {
  const definition = (encode: Record<string, unknown>): ReturnType<typeof parseDefinition> => parseDefinition({ name: 'p', stages: { encode } }, 'test');

  it('validates encode.dtype and encode.dimensions; leaving them out keeps the settings hash of older pipelines', () => {
    expect(definition({ dtype: 'int8', dimensions: 256 }).stages.encode).toMatchObject({ dtype: 'int8', dimensions: 256 });
    expect(() => definition({ dtype: 'int4' })).toThrow(/stages.encode.dtype/);
    expect(() => definition({ dimensions: 0 })).toThrow(/stages.encode.dimensions/);
    // Absent keys are not hashed, so a pipeline written before them keeps its rows; a type changes them.
    expect(settingsHash(definition({}))).toBe(settingsHash(definition({ dtype: undefined })));
    expect(settingsHash(definition({ dtype: 'float16' }))).not.toBe(settingsHash(definition({})));
  });

  it('search converts its query as the index records it; a job result carries the type its request asked for', () => {
    const spec = { dimension: 32, distance: 'cosine' as const, optionalColumns: [], metadata: { dimensions: '256' } };
    expect(queryShape({ ...spec, vectorType: 'ubinary' })).toEqual({ dtype: 'ubinary', dimensions: 256 });
    expect(queryShape({ ...spec, vectorType: 'float32', metadata: {} })).toEqual({});
    expect(() => queryShape({ ...spec, metadata: { dimensions: 'many' } })).toThrow(expect.objectContaining({ code: ErrorCode.CONFIG_INVALID }));
    expect(vectorShape({ primitive: 'encode' }, { model: 'm', items: ['a'], dtype: 'int8', dimensions: 64 })).toEqual({ dtype: 'int8', dimensions: 64 });
    expect(vectorShape({ primitive: 'encode' }, { model: 'm', items: ['a'], dtype: 'float32' })).toEqual({});
    expect(vectorShape({ primitive: 'score' }, { model: 'm', dtype: 'int8' })).toEqual({});
  });
});
