import pgvector from 'pgvector';
import { z } from 'zod';
import type { Distance, SparseValues, TableSpec } from '../store.js';
import { bitLength, isBinaryType, packBits, unpackBits } from '../shared/vector-types.js';

/**
 * The pgvector sink's type mapping (pgvector/store.ts): which column type stores a table's output type,
 * which operator and HNSW operator class search it, and how vectors go to SQL text and back.
 */

/** Distance → (operator, HNSW operator class); the operator gives a distance, smaller is nearer. */
const OPERATORS: Readonly<Record<Distance, { op: string; ops: string }>> = {
  cosine: { op: '<=>', ops: 'vector_cosine_ops' },
  l2: { op: '<->', ops: 'vector_l2_ops' },
  dot: { op: '<#>', ops: 'vector_ip_ops' },
};

/** A `vector` column as text (`[0.1,-2,3e-05]`: each float32 as its shortest decimal). */
const VectorText = z.string().transform((text, context) => {
  const values = text.replace(/^\[|\]$/g, '').split(',').map(Number);
  if (values.some((value) => !Number.isFinite(value))) {
    context.addIssue({ code: 'custom', message: 'not a pgvector vector' });
    return z.NEVER;
  }
  return values;
});

/**
 * How a table's output type is stored: float32 and the 8-bit codes in `vector(d)` (the codes are
 * small integers, exact in float32), float16 in `halfvec(d)`, the binary types in `bit(d×8)`
 * searched by Hamming distance (`<~>`, HNSW `bit_hamming_ops`). `cast` is the SQL type of one value.
 */
export interface PgVectorForm {
  column: string;
  cast: string;
  op: string;
  ops: string;
  toSql(values: ArrayLike<number>): string;
  /** The column read back as text (`vector::text`), as the type's values. */
  fromText(text: string): number[];
}

const BitText = z.string().regex(/^[01]*$/, 'not a pgvector bit string');

export function pgForm(spec: TableSpec): PgVectorForm {
  const type = spec.vectorType ?? 'float32';
  if (isBinaryType(type)) {
    const bits = bitLength(spec.dimension);
    return {
      column: `bit(${bits})`,
      cast: `bit(${bits})`,
      op: '<~>',
      ops: 'bit_hamming_ops',
      toSql: (values) => unpackBits(values, type).join(''),
      fromText: (text) => packBits(Array.from(BitText.parse(text), Number), type),
    };
  }
  const { op, ops } = OPERATORS[spec.distance];
  const half = type === 'float16';
  return {
    column: `${half ? 'halfvec' : 'vector'}(${spec.dimension})`,
    cast: half ? 'halfvec' : 'vector',
    op,
    ops: half ? ops.replace(/^vector_/, 'halfvec_') : ops,
    toSql: (values) => pgvector.toSql(Array.from(values)),
    // float32 text read back as float32: a half value or a code comes back exactly.
    fromText: (text) => VectorText.parse(text).map(Math.fround),
  };
}

/** A sparse vector as `sparsevec` text (pgvector's SparseVector takes a Map of index → value). */
export function sparseToSql(sparse: SparseValues): string {
  const weights = new Map(sparse.indices.map((index, at) => [index, sparse.values[at] ?? 0]));
  return pgvector.toSql(new pgvector.SparseVector(weights, sparse.dimension));
}

/** A `sparsevec` column read back as text; null (a row without one) stays null. */
export function sparseFromText(value: unknown): { indices: number[]; values: number[] } | null {
  return typeof value === 'string' ? new pgvector.SparseVector(value, undefined) : null;
}
