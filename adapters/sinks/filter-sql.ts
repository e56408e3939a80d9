import type { FilterNode, Literal } from './filter-tree.js';
import { FILTER_COLUMNS } from './sink.js';

/**
 * A filter tree as a PostgreSQL where-clause with `$n` placeholders: column names come from the
 * fixed FILTER_COLUMNS list (quoted), every value travels as a parameter, so user text is never
 * part of the SQL.
 */

export interface SqlFilter {
  sql: string;
  params: Literal[];
}

function column(name: string): string {
  if (!FILTER_COLUMNS.includes(name)) throw new Error(`unknown column ${name}`);
  return `"${name}"`;
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
      case 'compare':
        return `(${column(item.column)} ${item.op} ${param(item.value)})`;
      case 'in':
        return `(${item.negated ? 'NOT ' : ''}${column(item.column)} IN (${item.values.map(param).join(', ')}))`;
      case 'null':
        return `(${column(item.column)} IS ${item.negated ? 'NOT ' : ''}NULL)`;
      case 'like':
        return `(${column(item.column)} ${item.negated ? 'NOT ' : ''}LIKE ${param(item.pattern)})`;
    }
  };
  return { sql: walk(node), params };
}
