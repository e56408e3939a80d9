import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { metadataKeyOf } from './filter-metadata.js';
import type { CompareOp, FilterNode } from './filter-tree.js';

/**
 * What the stores without SQL share when they translate a filter tree into their own language
 * (chroma/filter.ts: Chroma's `where`; qdrant/filter.ts: Qdrant's payload filter): negations
 * pushed down to the comparisons (Chroma has no NOT), which columns may be null, and the refusal:
 * what a store cannot express is UNSUPPORTED_OPERATION naming the construct, never approximated.
 */

export function unsupported(store: string, what: string): ShoalError {
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
export const NULLABLE_COLUMNS: ReadonlySet<string> = new Set(['heading', 'entities', 'labels']);

/** A column a row may lack a value in: a nullable one, or a metadata field (absent from some documents). */
export function mayBeAbsent(column: string): boolean {
  return NULLABLE_COLUMNS.has(column) || metadataKeyOf(column) !== null;
}

/** A leaf (after pushNot) that is a negation, and so would match a null value in a store without SQL's nulls. */
export function negatedLeaf(node: Exclude<FilterNode, { kind: 'and' | 'or' | 'not' }>): boolean {
  if (node.kind === 'compare') return node.op === '<>';
  return node.kind !== 'null' && node.negated;
}
