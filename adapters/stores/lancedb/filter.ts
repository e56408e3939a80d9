import { sqlString } from '../shared/filter.js';
import { metadataKeyOf, namesMetadata } from '../shared/filter-metadata.js';
import { parseFilter, type CompareOp, type FilterNode, type Literal } from '../shared/filter-tree.js';

/**
 * A filter with `metadata.<field>` comparisons in LanceDB's SQL. The `metadata` column is
 * Lance's JSON type (lancedb/store.ts), read with Lance's JSON functions: `json_extract(metadata,
 * '$.f')` gives the field as JSON text (null when absent). Lance's filters take no CASE, so each
 * comparison is written as `COALESCE(match, FALSE) OR <field absent>`-style boolean algebra that
 * keeps shared/filter-metadata.ts's semantics: unknown for an absent or JSON-null field, false for a
 * value of another type (TRY_CAST gives null, COALESCE makes it false). Field names are checked
 * identifiers (never quoted user text); values are SQL literals.
 *
 * Ranges over strings compare the JSON text between the quotes, so a value holding a quote, a
 * backslash or a control character (escaped in JSON) may order differently than in the other
 * stores; equality compares the whole JSON text and is exact.
 */

function literal(value: Literal): string {
  if (typeof value === 'string') return sqlString(value);
  if (typeof value === 'boolean') return value ? 'TRUE' : 'FALSE';
  return String(value);
}

/** A leaf on a metadata field, as a boolean SQL expression that is null exactly when the field is absent or null. */
function metadataCompare(key: string, op: CompareOp, value: Literal): string {
  const field = `json_extract(\`metadata\`, '$.${key}')`;
  const absent = `NULLIF(${field}, 'null') <> NULLIF(${field}, 'null')`;
  let match: string;
  if (op === '=' || op === '<>') {
    if (typeof value === 'string') match = `${field} = ${sqlString(JSON.stringify(value))} OR json_array_contains(\`metadata\`, '$.${key}', ${sqlString(value)})`;
    else if (typeof value === 'number') match = `TRY_CAST(${field} AS DOUBLE) = ${literal(value)}`;
    else match = `${field} = '${String(value)}'`;
  } else if (typeof value === 'number') {
    match = `TRY_CAST(${field} AS DOUBLE) ${op} ${literal(value)}`;
  } else {
    match = `${field} LIKE '"%' AND substr(${field}, 2, length(${field}) - 2) ${op} ${literal(value)}`;
  }
  const equal = `(COALESCE(${match}, FALSE) OR ${absent})`;
  // `<>` is NOT `=`: still unknown for an absent field.
  return op === '<>' ? `(NOT ${equal})` : equal;
}

function column(name: string): string {
  return `\`${name}\``;
}

export function toLanceSql(tree: FilterNode): string {
  const walk = (node: FilterNode): string => {
    switch (node.kind) {
      case 'and':
      case 'or':
        return `(${node.items.map(walk).join(node.kind === 'and' ? ' AND ' : ' OR ')})`;
      case 'not':
        return `(NOT ${walk(node.item)})`;
      case 'compare': {
        const key = metadataKeyOf(node.column);
        return key === null ? `(${column(node.column)} ${node.op} ${literal(node.value)})` : metadataCompare(key, node.op, node.value);
      }
      case 'in': {
        const key = metadataKeyOf(node.column);
        if (key === null) return `(${column(node.column)} ${node.negated ? 'NOT ' : ''}IN (${node.values.map(literal).join(', ')}))`;
        const any = `(${node.values.map((value) => metadataCompare(key, '=', value)).join(' OR ')})`;
        return node.negated ? `(NOT ${any})` : any;
      }
      case 'null': {
        const key = metadataKeyOf(node.column);
        if (key === null) return `(${column(node.column)} IS ${node.negated ? 'NOT ' : ''}NULL)`;
        const field = `json_extract(\`metadata\`, '$.${key}')`;
        return node.negated ? `(${field} IS NOT NULL AND ${field} <> 'null')` : `(${field} IS NULL OR ${field} = 'null')`;
      }
      case 'like':
        return `(${column(node.column)} ${node.negated ? 'NOT ' : ''}LIKE ${sqlString(node.pattern)})`;
    }
  };
  return walk(tree);
}

/** The validated filter as LanceDB runs it: unchanged without metadata fields, translated with them. */
export function lanceFilter(filter: string): string {
  return namesMetadata(filter) ? toLanceSql(parseFilter(filter)) : filter;
}
