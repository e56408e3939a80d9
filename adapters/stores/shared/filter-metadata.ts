import { METADATA_KEY } from '../../protocol/metadata.js';
import type { CompareOp, Literal } from './filter-types.js';

/**
 * `metadata.<field>` in a filter: a field of the document metadata stored with each chunk
 * (adapters/protocol/metadata.ts). Its value may be a string, number, boolean, null or a list of
 * strings, and differs from row to row, so a comparison is defined here once, by the in-process
 * evaluator (the JSON Lines and S3 outputs), and each store's translation gives the same answers
 * (the sink contract checks it):
 * - an absent or null field makes the comparison unknown (SQL's null), as a null column does;
 * - `=` with a string matches that string, or a list holding it; with a number or true/false,
 *   that value (a number never equals a string: `metadata.year = '2020'` misses 2020);
 * - `<>` is `NOT =`; `<`, `<=`, `>`, `>=` compare numbers with numbers and strings with strings
 *   (ISO dates order as text); any other pairing is false;
 * - `IN (a, b)` is `= a OR = b`; `IS NULL` holds for an absent or null field.
 */

export const METADATA_PREFIX = 'metadata.';

/** The metadata field a filter column names (`metadata.year` → `year`), or null for a stored column. */
export function metadataKeyOf(column: string): string | null {
  if (!column.startsWith(METADATA_PREFIX)) return null;
  const key = column.slice(METADATA_PREFIX.length);
  return METADATA_KEY.test(key) ? key : null;
}

/**
 * Whether a validated filter (filter.ts's normalised text, columns in backticks) names a metadata
 * field: LanceDB then gets the translated SQL, and a table needs its metadata column.
 */
export function namesMetadata(filter: string): boolean {
  return /`metadata\.[A-Za-z_]/.test(filter);
}

/** The field's value in a stored row (its `metadata` object), undefined when absent. */
export function metadataValue(row: Readonly<Record<string, unknown>>, key: string): unknown {
  const metadata = row.metadata;
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) return undefined;
  return Object.hasOwn(metadata, key) ? (metadata as Record<string, unknown>)[key] : undefined;
}

function equals(value: unknown, literal: Literal): boolean {
  if (typeof literal === 'string' && Array.isArray(value)) return value.includes(literal);
  return value === literal;
}

function ordered(value: unknown, op: Exclude<CompareOp, '=' | '<>'>, literal: Literal): boolean {
  if (typeof literal === 'boolean' || typeof value !== typeof literal) return false;
  const x = value as string | number;
  switch (op) {
    case '<': return x < literal;
    case '<=': return x <= literal;
    case '>': return x > literal;
    case '>=': return x >= literal;
  }
}

/** One comparison of a metadata field, in SQL's three-valued logic (null: unknown). */
export function compareMetadata(value: unknown, op: CompareOp, literal: Literal): boolean | null {
  if (value === undefined || value === null) return null;
  if (op === '=') return equals(value, literal);
  if (op === '<>') return !equals(value, literal);
  return ordered(value, op, literal);
}
