import type { Where } from 'chromadb';
import { metadataKeyOf } from '../shared/filter-metadata.js';
import { negatedLeaf, NULLABLE_COLUMNS, pushNot, unsupported } from '../shared/filter-push-down.js';
import type { CompareOp, FilterNode, Literal } from '../shared/filter-tree.js';
import { chromaMetadataLeaf } from './metadata.js';

/** A filter tree in Chroma's `where` language (its negations pushed down first: Chroma has no NOT). */

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
 * A leaf on `metadata.<field>` (metadata.ts). Chroma's $ne, $nin and negated forms also
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
