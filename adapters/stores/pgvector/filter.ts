import { metadataKeyOf } from '../shared/filter-metadata.js';
import type { CompareOp, FilterNode, Literal } from '../shared/filter-tree.js';
import { FILTER_COLUMNS } from '../store.js';

/**
 * A filter tree as a PostgreSQL where-clause with `$n` placeholders: column names come from the
 * fixed FILTER_COLUMNS list (quoted), every value travels as a parameter, so user text is never
 * part of the SQL. A `metadata.<field>` comparison reads the `metadata` jsonb column, the field
 * name too as a parameter, and keeps shared/filter-metadata.ts's semantics with CASE on `jsonb_typeof`:
 * null (unknown) when the field is absent or JSON null, false for a value of another type; text
 * compares byte-wise (COLLATE "C"), as LanceDB and the in-process filter do.
 */

export interface SqlFilter {
  sql: string;
  params: Literal[];
}

function column(name: string): string {
  if (!FILTER_COLUMNS.includes(name)) throw new Error(`unknown column ${name}`);
  return `"${name}"`;
}

type Param = (value: Literal) => string;

/** One comparison of a metadata field: a boolean, or null when the field is absent or null. */
function metadataCompare(key: string, op: CompareOp, value: Literal, param: Param): string {
  const name = `${param(key)}::text`;
  const field = `("metadata" -> ${name})`;
  const text = `("metadata" ->> ${name})`;
  let match: string;
  if (op === '=' || op === '<>') {
    if (typeof value === 'string') match = `(${field} = to_jsonb(${param(value)}::text) OR (jsonb_typeof(${field}) = 'array' AND jsonb_exists(${field}, ${param(value)}::text)))`;
    else if (typeof value === 'number') match = `(CASE WHEN jsonb_typeof(${field}) = 'number' THEN ${text}::double precision = ${param(value)}::double precision ELSE FALSE END)`;
    else match = `(${field} = to_jsonb(${param(value)}::boolean))`;
    if (op === '<>') match = `(NOT ${match})`;
  } else if (typeof value === 'number') {
    match = `(CASE WHEN jsonb_typeof(${field}) = 'number' THEN ${text}::double precision ${op} ${param(value)}::double precision ELSE FALSE END)`;
  } else {
    match = `(CASE WHEN jsonb_typeof(${field}) = 'string' THEN ${text} COLLATE "C" ${op} ${param(value)}::text COLLATE "C" ELSE FALSE END)`;
  }
  return `(CASE WHEN ${field} IS NULL OR jsonb_typeof(${field}) = 'null' THEN NULL ELSE ${match} END)`;
}

function metadataIsNull(key: string, negated: boolean, param: Param): string {
  const field = `("metadata" -> ${param(key)}::text)`;
  const isNull = `(${field} IS NULL OR jsonb_typeof(${field}) = 'null')`;
  return negated ? `(NOT ${isNull})` : isNull;
}

/** `firstParam` is the number of the first placeholder (after the ones the caller already uses). */
export function filterToSql(node: FilterNode, firstParam: number): SqlFilter {
  const params: Literal[] = [];
  const param = (value: Literal): string => {
    params.push(value);
    return `$${firstParam + params.length - 1}`;
  };
  const walk = (item: FilterNode): string => {
    switch (item.kind) {
      case 'and':
      case 'or':
        return `(${item.items.map(walk).join(item.kind === 'and' ? ' AND ' : ' OR ')})`;
      case 'not':
        return `(NOT ${walk(item.item)})`;
      case 'compare': {
        const key = metadataKeyOf(item.column);
        if (key !== null) return metadataCompare(key, item.op, item.value, param);
        return `(${column(item.column)} ${item.op} ${param(item.value)})`;
      }
      case 'in': {
        const key = metadataKeyOf(item.column);
        if (key !== null) {
          const any = `(${item.values.map((value) => metadataCompare(key, '=', value, param)).join(' OR ')})`;
          return item.negated ? `(NOT ${any})` : any;
        }
        return `(${item.negated ? 'NOT ' : ''}${column(item.column)} IN (${item.values.map(param).join(', ')}))`;
      }
      case 'null': {
        const key = metadataKeyOf(item.column);
        if (key !== null) return metadataIsNull(key, item.negated, param);
        return `(${column(item.column)} IS ${item.negated ? 'NOT ' : ''}NULL)`;
      }
      case 'like':
        return `(${column(item.column)} ${item.negated ? 'NOT ' : ''}LIKE ${param(item.pattern)})`;
    }
  };
  return { sql: walk(node), params };
}
