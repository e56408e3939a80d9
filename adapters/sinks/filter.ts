import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { FILTER_COLUMNS } from './sink.js';

/**
 * `--filter` is a SQL where-clause (LanceDB's DataFusion dialect) over metadata columns. It is
 * checked here before any backend sees it: only known columns, literals, comparisons and boolean
 * logic, so a typo fails with a clear message and nothing but a predicate reaches the database.
 */

const KEYWORDS = new Set(['AND', 'OR', 'NOT', 'IN', 'IS', 'NULL', 'LIKE', 'BETWEEN', 'TRUE', 'FALSE']);
const OPERATORS = ['<=', '>=', '<>', '!=', '=', '<', '>', '(', ')', ','];
const MAX_FILTER_CHARS = 4_096;

type Token = { kind: 'identifier' | 'keyword' | 'string' | 'number' | 'operator'; text: string };

function invalid(message: string): ShoalError {
  return new ShoalError(ErrorCode.INVALID_INPUT, `--filter: ${message}`);
}

function tokenize(expression: string): Token[] {
  const tokens: Token[] = [];
  let at = 0;
  while (at < expression.length) {
    const rest = expression.slice(at);
    const space = /^\s+/.exec(rest);
    if (space !== null) {
      at += space[0].length;
      continue;
    }
    const string = /^'(?:[^']|'')*'/.exec(rest);
    if (string !== null) {
      tokens.push({ kind: 'string', text: string[0] });
      at += string[0].length;
      continue;
    }
    const number = /^-?\d+(?:\.\d+)?/.exec(rest);
    if (number !== null) {
      tokens.push({ kind: 'number', text: number[0] });
      at += number[0].length;
      continue;
    }
    const word = /^[A-Za-z_][A-Za-z0-9_]*/.exec(rest) ?? /^`[A-Za-z_][A-Za-z0-9_]*`/.exec(rest);
    if (word !== null) {
      const bare = word[0].replaceAll('`', '');
      tokens.push(KEYWORDS.has(bare.toUpperCase()) && !word[0].startsWith('`') ? { kind: 'keyword', text: bare.toUpperCase() } : { kind: 'identifier', text: bare });
      at += word[0].length;
      continue;
    }
    const operator = OPERATORS.find((op) => rest.startsWith(op));
    if (operator === undefined) throw invalid(`unexpected ${JSON.stringify(rest[0])} at character ${at + 1}`);
    tokens.push({ kind: 'operator', text: operator });
    at += operator.length;
  }
  return tokens;
}

/**
 * Returns the expression as the backend should receive it, or throws INVALID_INPUT naming the problem.
 * Column names are quoted with backticks (`end` is an SQL keyword).
 */
export function validateFilter(expression: string): string {
  if (expression.trim() === '') throw invalid('empty expression');
  if (expression.length > MAX_FILTER_CHARS) throw invalid(`longer than ${MAX_FILTER_CHARS} characters`);
  const tokens = tokenize(expression);
  let depth = 0;
  let operands = 0;
  for (const token of tokens) {
    if (token.kind === 'identifier') {
      if (!FILTER_COLUMNS.includes(token.text)) {
        throw invalid(`unknown column ${JSON.stringify(token.text)} (columns: ${FILTER_COLUMNS.join(', ')})`);
      }
      operands += 1;
    }
    if (token.kind === 'string' || token.kind === 'number') operands += 1;
    if (token.text === '(') depth += 1;
    if (token.text === ')') depth -= 1;
    if (depth < 0) throw invalid('unbalanced parentheses');
  }
  if (depth !== 0) throw invalid('unbalanced parentheses');
  if (operands === 0) throw invalid('no column or value to compare');
  return tokens.map((token) => (token.kind === 'identifier' ? `\`${token.text}\`` : token.text)).join(' ');
}

/** A string literal for a where-clause. */
export function sqlString(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}
