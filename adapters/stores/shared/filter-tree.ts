import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { compareMetadata, metadataKeyOf, metadataValue } from './filter-metadata.js';
import { likeMatcher, type LikeMatcher } from './like-pattern.js';
import { FILTER_COLUMNS } from '../store.js';
import type { CompareOp, Literal } from './filter-types.js';

/**
 * The one grammar of `--filter` (a SQL where-clause over metadata columns, LanceDB's DataFusion
 * dialect): tokens, the checks every expression must pass, and the parse into a small tree, so
 * backends without SQL (Chroma, Qdrant, the JSON Lines files) and PostgreSQL (as parameterised
 * SQL) can each translate it; the user's text never reaches a database as text. `validateFilter`
 * (filter.ts) is this parse plus the normalised text LanceDB receives.
 *
 * Grammar: or := and (OR and)*; and := not (AND not)*; not := NOT not | primary;
 * primary := '(' or ')' | column op value | column [NOT] IN (values) | column IS [NOT] NULL
 *          | column [NOT] LIKE 'pattern' | column [NOT] BETWEEN value AND value.
 * A column is a stored column (FILTER_COLUMNS) or `metadata.<field>`, a field of the document
 * metadata (shared/filter-metadata.ts defines how its values compare; LIKE is for stored text columns).
 */

export type { CompareOp, Literal } from './filter-types.js';

export type FilterNode =
  | { kind: 'and'; items: FilterNode[] }
  | { kind: 'or'; items: FilterNode[] }
  | { kind: 'not'; item: FilterNode }
  | { kind: 'compare'; column: string; op: CompareOp; value: Literal }
  | { kind: 'in'; column: string; values: Literal[]; negated: boolean }
  | { kind: 'null'; column: string; negated: boolean }
  | { kind: 'like'; column: string; pattern: string; negated: boolean };

/**
 * A string token holds its value (quotes removed, `''` undone); an operator its text as written
 * (`!=` stays `!=`, the parser reads it as `<>`); a keyword is upper-cased; an identifier is a
 * column name without backticks.
 */
export type FilterToken = { kind: 'identifier' | 'keyword' | 'string' | 'number' | 'operator'; text: string };

const KEYWORDS = new Set(['AND', 'OR', 'NOT', 'IN', 'IS', 'NULL', 'LIKE', 'BETWEEN', 'TRUE', 'FALSE']);
const OPERATORS = ['<=', '>=', '<>', '!=', '=', '<', '>', '(', ')', ','];
const MAX_FILTER_CHARS = 4_096;
const COMPARE_OPS: readonly CompareOp[] = ['=', '<>', '<', '<=', '>', '>='];
/**
 * Deep nesting is refused rather than risking the stack on a hostile expression; 32, because
 * LanceDB's SQL parser gives up ("recursion limit exceeded") before 60 levels.
 */
const MAX_DEPTH = 32;
/**
 * The in-process backends (file://, S3) run the filter on every row on the event loop, and LIKE
 * costs up to (value length × pattern length) steps there: the patterns of one filter total at
 * most 256 characters, and a filter has at most 64 predicates, so a row's work stays bounded
 * (docs/storage.md). The same limits apply to every backend, so a filter one accepts none refuses.
 */
export const MAX_LIKE_PATTERN_CHARS = 256;
export const MAX_PREDICATES = 64;

function invalid(message: string): ShoalError {
  return new ShoalError(ErrorCode.INVALID_INPUT, `filter: ${message}`, { details: { field: 'filter' } });
}

/** The whole-number columns (32-bit in every backend); every other column is text. */
const NUMBER_COLUMNS: ReadonlySet<string> = new Set(['page', 'chunk', 'start', 'end']);
const INT32_MAX = 2_147_483_647;

/**
 * A value of the column's type, checked here so that every backend gets a comparison it can run:
 * LanceDB answered `page = 'abc'`, `page = '3'` or `document_id = 1` with a planner error and a
 * Rust backtrace.
 */
function checkValue(column: string, value: Literal): void {
  // A metadata field holds any type: every literal compares (shared/filter-metadata.ts).
  if (metadataKeyOf(column) !== null) return;
  if (NUMBER_COLUMNS.has(column)) {
    if (typeof value !== 'number') throw invalid(`${column} is a whole number: compare it with a number, unquoted (${column} = 3), not ${typeof value === 'string' ? `'${value}'` : String(value)}`);
    if (Math.abs(value) > INT32_MAX) throw invalid(`${column} is a whole number of at most ${INT32_MAX}, not ${String(value)}`);
    // LanceDB refused `page = 1.5` with a planner error ("Received literal Float64(1.5) and could not convert to literal of type 'Int32'").
    if (!Number.isInteger(value)) throw invalid(`${column} is a whole number: compare it with a whole number (${column} = 3), not ${String(value)}`);
    return;
  }
  if (typeof value !== 'string') throw invalid(`${column} is text: quote the value (${column} = '${String(value)}')`);
}

/** What an unexpected quote most likely means (a string literal takes single quotes, doubled inside). */
const QUOTE_HINTS: ReadonlyMap<string, string> = new Map([
  ["'", ": a string that is never closed (end it with '; write '' for a quote inside it)"],
  ['"', ": strings take single quotes ('text'), and column names none"],
]);

/** A name, or `metadata.<field>` (one dot at most; anything after a second dot is left for the next token and refused). */
const NAME = /^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?/;
const QUOTED_NAME = /^`[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?`/;

/** A stored column or a metadata field `metadata.<field>`. */
export function isFilterColumn(name: string): boolean {
  return FILTER_COLUMNS.includes(name) || metadataKeyOf(name) !== null;
}

function tokenize(expression: string): FilterToken[] {
  const tokens: FilterToken[] = [];
  let at = 0;
  while (at < expression.length) {
    const rest = expression.slice(at);
    // A backticked name needs both backticks: one alone is a typo, not a quote.
    const match =
      /^\s+/.exec(rest) ?? /^'(?:[^']|'')*'/.exec(rest) ?? /^-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![A-Za-z0-9_])/.exec(rest) ?? NAME.exec(rest) ?? QUOTED_NAME.exec(rest);
    if (match !== null) {
      const text = match[0];
      at += text.length;
      if (/^\s/.test(text)) continue;
      if (text.startsWith("'")) tokens.push({ kind: 'string', text: text.slice(1, -1).replaceAll("''", "'") });
      else if (/^-?\d/.test(text)) {
        // Read as a number here (it read as the number 1 and a column `e3`), but LanceDB's SQL takes no exponent.
        if (/[eE]/.test(text)) throw invalid(`write ${text} without an exponent (${Number(text)}) at character ${at - text.length + 1}`);
        tokens.push({ kind: 'number', text });
      }
      else if (text.startsWith('`')) tokens.push({ kind: 'identifier', text: text.replaceAll('`', '') });
      else tokens.push(KEYWORDS.has(text.toUpperCase()) && !text.includes('.') ? { kind: 'keyword', text: text.toUpperCase() } : { kind: 'identifier', text });
      continue;
    }
    const operator = OPERATORS.find((op) => rest.startsWith(op));
    if (operator === undefined) throw invalid(`unexpected ${JSON.stringify(rest[0])} at character ${at + 1}${QUOTE_HINTS.get(rest[0] ?? '') ?? ''}`);
    tokens.push({ kind: 'operator', text: operator });
    at += operator.length;
  }
  return tokens;
}

/**
 * Checks over the whole token list before the parse, so the commonest mistakes get a plain
 * message: a column that does not exist (every identifier is a column), unbalanced parentheses,
 * nothing to compare.
 */
function checkTokens(tokens: readonly FilterToken[]): void {
  let depth = 0;
  let operands = 0;
  for (const token of tokens) {
    if (token.kind === 'identifier') {
      if (!isFilterColumn(token.text)) {
        const metadata = token.text.startsWith('metadata.') ? ': a metadata field is 1-64 letters, digits and _, not starting with a digit' : '';
        throw invalid(`unknown column ${JSON.stringify(token.text)}${metadata} (columns: ${FILTER_COLUMNS.join(', ')}, metadata.<field>)`);
      }
      operands += 1;
    }
    if (token.kind === 'string' || token.kind === 'number') operands += 1;
    if (token.kind === 'operator' && token.text === '(') depth += 1;
    if (token.kind === 'operator' && token.text === ')') depth -= 1;
    if (depth < 0) throw invalid('unbalanced parentheses');
  }
  if (depth !== 0) throw invalid('unbalanced parentheses');
  if (operands === 0) throw invalid('no column or value to compare');
}

class Parser {
  #at = 0;
  #predicates = 0;
  #likeChars = 0;
  readonly #tokens: readonly FilterToken[];

  constructor(tokens: readonly FilterToken[]) {
    this.#tokens = tokens;
  }

  parse(): FilterNode {
    const node = this.#or(0);
    const extra = this.#tokens[this.#at];
    if (extra !== undefined) throw invalid(`unexpected ${JSON.stringify(extra.text)}`);
    return node;
  }

  #peek(): FilterToken | undefined {
    return this.#tokens[this.#at];
  }

  #accept(kind: FilterToken['kind'], text?: string): FilterToken | null {
    const token = this.#peek();
    if (token === undefined || token.kind !== kind || (text !== undefined && token.text !== text)) return null;
    this.#at += 1;
    return token;
  }

  #expect(kind: FilterToken['kind'], text?: string): FilterToken {
    const token = this.#accept(kind, text);
    if (token === null) throw invalid(`expected ${text ?? kind} ${this.#peek() === undefined ? 'at the end' : `before ${JSON.stringify(this.#peek()?.text)}`}`);
    return token;
  }

  #or(depth: number): FilterNode {
    if (depth > MAX_DEPTH) throw invalid(`nested deeper than ${MAX_DEPTH}`);
    const items = [this.#and(depth)];
    while (this.#accept('keyword', 'OR') !== null) items.push(this.#and(depth));
    return items.length === 1 && items[0] !== undefined ? items[0] : { kind: 'or', items };
  }

  #and(depth: number): FilterNode {
    const items = [this.#not(depth)];
    while (this.#accept('keyword', 'AND') !== null) items.push(this.#not(depth));
    return items.length === 1 && items[0] !== undefined ? items[0] : { kind: 'and', items };
  }

  #not(depth: number): FilterNode {
    if (this.#accept('keyword', 'NOT') !== null) return { kind: 'not', item: this.#not(depth + 1) };
    if (this.#accept('operator', '(') !== null) {
      const inner = this.#or(depth + 1);
      this.#expect('operator', ')');
      return inner;
    }
    return this.#predicate();
  }

  #literal(): Literal {
    const token = this.#peek();
    if (token?.kind === 'string') {
      this.#at += 1;
      return token.text;
    }
    if (token?.kind === 'number') {
      this.#at += 1;
      return Number(token.text);
    }
    if (token?.kind === 'keyword' && (token.text === 'TRUE' || token.text === 'FALSE')) {
      this.#at += 1;
      return token.text === 'TRUE';
    }
    throw invalid(`expected a 'string' or a number ${token === undefined ? 'at the end' : `before ${JSON.stringify(token.text)}`}`);
  }

  #predicate(): FilterNode {
    this.#predicates += 1;
    if (this.#predicates > MAX_PREDICATES) throw invalid(`more than ${MAX_PREDICATES} predicates (comparisons, IN, IS NULL, LIKE, BETWEEN)`);
    // Known by now: checkTokens has checked every identifier.
    const column = this.#expect('identifier').text;
    if (this.#accept('keyword', 'IS') !== null) {
      const negated = this.#accept('keyword', 'NOT') !== null;
      this.#expect('keyword', 'NULL');
      return { kind: 'null', column, negated };
    }
    const negated = this.#accept('keyword', 'NOT') !== null;
    if (this.#accept('keyword', 'IN') !== null) {
      this.#expect('operator', '(');
      const values = [this.#literal()];
      while (this.#accept('operator', ',') !== null) values.push(this.#literal());
      this.#expect('operator', ')');
      for (const value of values) checkValue(column, value);
      return { kind: 'in', column, values, negated };
    }
    if (this.#accept('keyword', 'LIKE') !== null) {
      const pattern = this.#literal();
      if (typeof pattern !== 'string') throw invalid('LIKE takes a quoted pattern');
      if (NUMBER_COLUMNS.has(column)) throw invalid(`LIKE matches text, and ${column} is a number: compare it (${column} >= 3)`);
      if (metadataKeyOf(column) !== null) throw invalid(`LIKE is for the stored text columns (text, source, heading...), not metadata fields: compare ${column} with =, IN or a range`);
      this.#likeChars += [...pattern].length;
      if (this.#likeChars > MAX_LIKE_PATTERN_CHARS) throw invalid(`LIKE patterns longer than ${MAX_LIKE_PATTERN_CHARS} characters in all`);
      return { kind: 'like', column, pattern, negated };
    }
    if (this.#accept('keyword', 'BETWEEN') !== null) {
      const low = this.#literal();
      this.#expect('keyword', 'AND');
      const high = this.#literal();
      checkValue(column, low);
      checkValue(column, high);
      const range: FilterNode = { kind: 'and', items: [{ kind: 'compare', column, op: '>=', value: low }, { kind: 'compare', column, op: '<=', value: high }] };
      return negated ? { kind: 'not', item: range } : range;
    }
    if (negated) throw invalid(`NOT after ${column} must be followed by IN, LIKE or BETWEEN`);
    const written = this.#expect('operator').text;
    const op = COMPARE_OPS.find((candidate) => candidate === (written === '!=' ? '<>' : written));
    if (op === undefined) throw invalid(`expected a comparison after ${column}, got ${JSON.stringify(written)}`);
    const value = this.#literal();
    checkValue(column, value);
    if (typeof value === 'boolean' && op !== '=' && op !== '<>') throw invalid(`true and false compare with = or <> only (${column} ${op} ${String(value)})`);
    return { kind: 'compare', column, op, value };
  }
}

export interface ParsedFilter {
  tree: FilterNode;
  tokens: readonly FilterToken[];
}

/** The tokens and tree of a filter expression, or INVALID_INPUT naming the first problem. */
export function readFilter(expression: string): ParsedFilter {
  if (expression.trim() === '') throw invalid('empty expression');
  if (expression.length > MAX_FILTER_CHARS) throw invalid(`longer than ${MAX_FILTER_CHARS} characters`);
  const tokens = tokenize(expression);
  checkTokens(tokens);
  return { tree: new Parser(tokens).parse(), tokens };
}

/** The tree of a filter expression, or INVALID_INPUT naming the problem. */
export function parseFilter(expression: string): FilterNode {
  return readFilter(expression).tree;
}

/** The compiled matcher of each pattern of one filter. */
class LikeMatchers {
  readonly #byPattern = new Map<string, LikeMatcher>();

  of(pattern: string): LikeMatcher {
    let matcher = this.#byPattern.get(pattern);
    if (matcher === undefined) {
      matcher = likeMatcher(pattern);
      this.#byPattern.set(pattern, matcher);
    }
    return matcher;
  }
}

function compare(left: unknown, op: CompareOp, right: Literal): boolean | null {
  if (left === null || left === undefined) return null;
  const a = typeof right === 'number' && typeof left === 'string' ? Number(left) : left;
  const b = typeof left === 'number' && typeof right === 'string' ? Number(right) : right;
  if (typeof a !== typeof b) return false;
  const x = a as string | number | boolean;
  switch (op) {
    case '=': return x === b;
    case '<>': return x !== b;
    case '<': return x < b;
    case '<=': return x <= b;
    case '>': return x > b;
    case '>=': return x >= b;
  }
}

/** SQL's three-valued logic: null (unknown) when a compared column is null. */
function evaluate(node: FilterNode, row: Readonly<Record<string, unknown>>, likes: LikeMatchers): boolean | null {
  switch (node.kind) {
    case 'and': {
      let unknown = false;
      for (const item of node.items) {
        const value = evaluate(item, row, likes);
        if (value === false) return false;
        if (value === null) unknown = true;
      }
      return unknown ? null : true;
    }
    case 'or': {
      let unknown = false;
      for (const item of node.items) {
        const value = evaluate(item, row, likes);
        if (value === true) return true;
        if (value === null) unknown = true;
      }
      return unknown ? null : false;
    }
    case 'not': {
      const value = evaluate(node.item, row, likes);
      return value === null ? null : !value;
    }
    case 'compare': {
      const key = metadataKeyOf(node.column);
      return key === null ? compare(row[node.column], node.op, node.value) : compareMetadata(metadataValue(row, key), node.op, node.value);
    }
    case 'in': {
      const key = metadataKeyOf(node.column);
      const value = key === null ? row[node.column] : metadataValue(row, key);
      if (value === null || value === undefined) return null;
      const equal = key === null ? compare : compareMetadata;
      const found = node.values.some((candidate) => equal(value, '=', candidate) === true);
      return node.negated ? !found : found;
    }
    case 'null': {
      const key = metadataKeyOf(node.column);
      const value = key === null ? row[node.column] : metadataValue(row, key);
      const isNull = value === null || value === undefined;
      return node.negated ? !isNull : isNull;
    }
    case 'like': {
      const value = row[node.column];
      if (value === null || value === undefined) return null;
      const found = likes.of(node.pattern)(String(value));
      return node.negated ? !found : found;
    }
  }
}

/**
 * Whether a stored row passes the filter (rows where it is unknown do not, as in SQL), as a
 * function made once per scan: each LIKE pattern is compiled on its first row, not on every row.
 */
export function filterPredicate(node: FilterNode): (row: Readonly<Record<string, unknown>>) => boolean {
  const likes = new LikeMatchers();
  return (row) => evaluate(node, row, likes) === true;
}

/** One row's test; filterPredicate for a scan. */
export function matchesFilter(node: FilterNode, row: Readonly<Record<string, unknown>>): boolean {
  return filterPredicate(node)(row);
}
