import type { Where } from 'chromadb';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { chromaMetadataLeaf } from '../chroma/metadata.js';
import { metadataKeyOf } from './filter-metadata.js';
import type { CompareOp, FilterNode, Literal } from './filter-tree.js';

/**
 * A filter tree in the filter languages of the stores without SQL: Chroma's `where` and Qdrant's
 * payload filter. Negations are pushed down to the comparisons (Chroma has no NOT). What a store
 * cannot express is refused with UNSUPPORTED_OPERATION naming the construct, never approximated.
 */

function unsupported(store: string, what: string): ShoalError {
  return new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `filter: ${store} cannot filter on ${what} (docs/storage.md lists what each backend supports)`, { details: { field: 'filter' } });
}

const NEGATED: Readonly<Record<CompareOp, CompareOp>> = { '=': '<>', '<>': '=', '<': '>=', '<=': '>', '>': '<=', '>=': '<' };

/** The same tree with NOT moved onto the leaves (De Morgan), so no `not` node remains above a leaf. */
export function pushNot(node: FilterNode, negate = false): FilterNode {
  switch (node.kind) {
    case 'not':
      return pushNot(node.item, !negate);
    case 'and':
    case 'or': {
      const items = node.items.map((item) => pushNot(item, negate));
      return (node.kind === 'and') !== negate ? { kind: 'and', items } : { kind: 'or', items };
    }
    case 'compare':
      // A metadata field of another type fails every comparison, so NOT `>=` is not `<` there: the NOT stays.
      if (negate && metadataKeyOf(node.column) !== null && node.op !== '=' && node.op !== '<>') return { kind: 'not', item: node };
      return negate ? { ...node, op: NEGATED[node.op] } : node;
    case 'in':
    case 'null':
    case 'like':
      return negate ? { ...node, negated: !node.negated } : node;
  }
}

/**
 * Columns a row may hold null in (left out of a Chroma record's metadata, null in a Qdrant
 * payload). SQL, as LanceDB and PostgreSQL run it, makes a comparison with null unknown, and its
 * negation too: a row without a heading matches neither `heading = 'H'` nor `heading <> 'H'`. A
 * store's own "not equal" matches such a row, so a negated leaf on these columns needs the
 * "is not null" condition beside it (Qdrant), or is refused where none can be said (Chroma).
 */
const NULLABLE_COLUMNS: ReadonlySet<string> = new Set(['heading', 'entities', 'labels']);

/** A column a row may lack a value in: a nullable one, or a metadata field (absent from some documents). */
function mayBeAbsent(column: string): boolean {
  return NULLABLE_COLUMNS.has(column) || metadataKeyOf(column) !== null;
}

/** A leaf (after pushNot) that is a negation, and so would match a null value in a store without SQL's nulls. */
function negatedLeaf(node: Exclude<FilterNode, { kind: 'and' | 'or' | 'not' }>): boolean {
  if (node.kind === 'compare') return node.op === '<>';
  return node.kind !== 'null' && node.negated;
}

// ---- Chroma ---------------------------------------------------------------------------------

export type ChromaWhere = Where;

function chromaLeaf(column: string, op: CompareOp, value: Literal): Where {
  switch (op) {
    case '=': return { [column]: { $eq: value } };
    case '<>': return { [column]: { $ne: value } };
    case '<': return { [column]: { $lt: value } };
    case '<=': return { [column]: { $lte: value } };
    case '>': return { [column]: { $gt: value } };
    case '>=': return { [column]: { $gte: value } };
  }
}
/** Chroma keeps `text` as the record's document, not in its metadata. */
const CHROMA_UNFILTERABLE = new Set(['text']);

export function toChromaWhere(tree: FilterNode): ChromaWhere {
  const walk = (node: FilterNode): ChromaWhere => {
    if (node.kind === 'and' || node.kind === 'or') {
      const items = node.items.map(walk);
      if (items.length === 1 && items[0] !== undefined) return items[0];
      return node.kind === 'and' ? { $and: items } : { $or: items };
    }
    if (node.kind === 'not') throw unsupported('Chroma', 'NOT over this expression');
    if (metadataKeyOf(node.column) !== null) return chromaMetadata(node);
    if (CHROMA_UNFILTERABLE.has(node.column)) throw unsupported('Chroma', `the ${node.column} column`);
    // Chroma has no "key present" test: its $ne / $nin would also match the rows without the key.
    if (NULLABLE_COLUMNS.has(node.column) && negatedLeaf(node)) throw unsupported('Chroma', `a negated comparison (<>, NOT IN, NOT =) of ${node.column}, which may be null`);
    if (node.kind === 'compare') {
      if ((node.op !== '=' && node.op !== '<>') && typeof node.value !== 'number') throw unsupported('Chroma', `${node.op} with a non-number (${node.column})`);
      return chromaLeaf(node.column, node.op, node.value);
    }
    if (node.kind === 'in') return { [node.column]: node.negated ? { $nin: node.values } : { $in: node.values } };
    if (node.kind === 'null') throw unsupported('Chroma', 'IS [NOT] NULL');
    throw unsupported('Chroma', 'LIKE');
  };
  return walk(pushNot(tree));
}

/**
 * A leaf on `metadata.<field>` (chroma-metadata.ts). Chroma's $ne, $nin and negated forms also
 * match records without the field, which SQL leaves unknown, and it has no test for an absent
 * field to rule them out: negations and IS NULL are refused, as are ranges over strings.
 */
function chromaMetadata(node: Exclude<FilterNode, { kind: 'and' | 'or' | 'not' }>): ChromaWhere {
  if (node.kind === 'null') throw unsupported('Chroma', 'IS [NOT] NULL');
  if (node.kind === 'like') throw unsupported('Chroma', 'LIKE');
  if (negatedLeaf(node)) throw unsupported('Chroma', `a negated comparison (<>, NOT IN, NOT) of ${node.column}: Chroma would also match documents without that field`);
  if (node.kind === 'compare' && node.op !== '=' && typeof node.value !== 'number') throw unsupported('Chroma', `${node.op} with a non-number (${node.column})`);
  return chromaMetadataLeaf(node);
}

// ---- Qdrant ---------------------------------------------------------------------------------

export type QdrantCondition = Record<string, unknown> | QdrantFilter;
export interface QdrantFilter {
  must?: QdrantCondition[];
  should?: QdrantCondition[];
  must_not?: QdrantCondition[];
}

/** Qdrant's test for a field without a value: is_null for a stored column; is_empty (absent, null or an empty list) for a metadata field. */
function qdrantNull(column: string): QdrantCondition {
  return metadataKeyOf(column) === null ? { is_null: { key: column } } : { is_empty: { key: column } };
}

/**
 * `=` on a metadata field: `match value` for strings and booleans (a list matches by any item),
 * a closed range for numbers (Qdrant's `match` takes no fractions; a range takes integers and
 * floats alike).
 */
function qdrantEquals(column: string, value: Literal): QdrantCondition {
  return typeof value === 'number' ? { key: column, range: { gte: value, lte: value } } : { key: column, match: { value } };
}

function qdrantLeaf(node: Exclude<FilterNode, { kind: 'and' | 'or' | 'not' }>): { condition: QdrantCondition; negated: boolean } {
  if (node.kind === 'null') return { condition: qdrantNull(node.column), negated: node.negated };
  if (node.kind === 'like') throw unsupported('Qdrant', 'LIKE');
  if (node.kind === 'in' && metadataKeyOf(node.column) !== null) {
    // Qdrant's `match any` takes strings or integers, not both nor fractions: one condition per value.
    return { condition: { should: node.values.map((value) => qdrantEquals(node.column, value)) }, negated: node.negated };
  }
  if (node.kind === 'in') return { condition: { key: node.column, match: { any: node.values } }, negated: node.negated };
  const { column, op, value } = node;
  if ((op === '=' || op === '<>') && metadataKeyOf(column) !== null) return { condition: qdrantEquals(column, value), negated: op === '<>' };
  if (op === '=' || op === '<>') return { condition: { key: column, match: { value } }, negated: op === '<>' };
  if (typeof value !== 'number') throw unsupported('Qdrant', `${op} with a non-number (${column})`);
  const bound: Record<CompareOp, string> = { '<': 'lt', '<=': 'lte', '>': 'gt', '>=': 'gte', '=': '', '<>': '' };
  return { condition: { key: column, range: { [bound[op]]: value } }, negated: false };
}

/**
 * A Qdrant filter (must / should / must_not nest as conditions). NOT is pushed onto the leaves
 * first, so that each negated leaf on a nullable column can leave out the null rows, as SQL does.
 */
export function toQdrantFilter(tree: FilterNode): QdrantFilter {
  const walk = (node: FilterNode): QdrantFilter => {
    if (node.kind === 'and') return { must: node.items.map(walk) };
    if (node.kind === 'or') return { should: node.items.map(walk) };
    if (node.kind === 'not') {
      // Left by pushNot only above a metadata range: unknown (no match) where the field is absent.
      const inner = node.item;
      if (inner.kind === 'compare' && metadataKeyOf(inner.column) !== null) return { must_not: [walk(inner), qdrantNull(inner.column)] };
      return { must_not: [walk(inner)] };
    }
    const { condition, negated } = qdrantLeaf(node);
    if (!negated) return { must: [condition] };
    // `heading <> 'H'` is unknown (no match) for a null heading; Qdrant's must_not alone matches it.
    return mayBeAbsent(node.column) && negatedLeaf(node) ? { must_not: [condition, qdrantNull(node.column)] } : { must_not: [condition] };
  };
  return walk(pushNot(tree));
}
