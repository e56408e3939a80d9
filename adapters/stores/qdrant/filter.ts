import { metadataKeyOf } from '../shared/filter-metadata.js';
import { mayBeAbsent, negatedLeaf, pushNot, unsupported } from '../shared/filter-push-down.js';
import type { CompareOp, FilterNode, Literal } from '../shared/filter-tree.js';

/** A filter tree as a Qdrant payload filter (must / should / must_not). */

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
