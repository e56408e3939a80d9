import { readFilter, type FilterToken } from './filter-tree.js';

/**
 * `--filter` is a SQL where-clause (LanceDB's DataFusion dialect) over metadata columns. It is
 * checked here before any backend sees it, by the one grammar in shared/filter-tree.ts (known columns,
 * literals, comparisons and boolean logic), so a typo fails with a clear message and nothing but a
 * predicate reaches the database.
 */

/** A string literal for a where-clause. */
export function sqlString(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}

/** `('a', 'b', …)`: quoted strings for a SQL `IN`. */
export function sqlStringList(values: readonly string[]): string {
  return `(${values.map(sqlString).join(', ')})`;
}

function render(token: FilterToken): string {
  if (token.kind === 'identifier') return `\`${token.text}\``;
  if (token.kind === 'string') return sqlString(token.text);
  return token.text;
}

/**
 * Returns the expression as the backend should receive it, or throws INVALID_INPUT (`details.field`
 * 'filter'; the CLI words it `--filter: …`, HTTP `filter: …`) naming the problem. The text is the expression's tokens, one space apart:
 * column names quoted with backticks (`end` is an SQL keyword), keywords upper-cased.
 */
export function validateFilter(expression: string): string {
  return readFilter(expression).tokens.map(render).join(' ');
}
