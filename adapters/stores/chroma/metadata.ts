import type { Metadata, Where } from 'chromadb';
import type { DocumentMetadata } from '../../protocol/metadata.js';
import type { FilterNode, Literal } from '../shared/filter-tree.js';
import { METADATA_PREFIX } from '../shared/filter-metadata.js';

/**
 * Document metadata in a Chroma record: the whole object as JSON text under `metadata` (what hits
 * return), and each scalar field under `metadata.<field>` (what `where` filters on). The Chroma
 * server takes no lists as metadata values, so a list field is kept as one flag per item,
 * `metadata.<field>[]<item>: true`, and `= 'item'` asks for that flag. Null fields are left out,
 * as Chroma leaves out nulls: an absent field is what `where` cannot see either way.
 */

/** The flag of one item of a list field. */
function itemKey(column: string, item: string): string {
  return `${column}[]${item}`;
}

export function chromaMetadataFields(metadata: DocumentMetadata | null | undefined): Metadata {
  if (metadata === null || metadata === undefined) return {};
  const out: Metadata = { metadata: JSON.stringify(metadata) };
  for (const [key, value] of Object.entries(metadata)) {
    if (value === null) continue;
    if (Array.isArray(value)) for (const item of value) out[itemKey(`${METADATA_PREFIX}${key}`, item)] = true;
    else out[`${METADATA_PREFIX}${key}`] = value;
  }
  return out;
}

/** `=` a value: a scalar field equal to it, or (for a string) a list field holding it. */
function equalTo(column: string, value: Literal): Where {
  if (typeof value !== 'string') return { [column]: { $eq: value } };
  return { $or: [{ [column]: { $eq: value } }, { [itemKey(column, value)]: { $eq: true } }] };
}

/**
 * A positive leaf on `metadata.<field>` (chroma/filter.ts refuses the negated ones and IS NULL,
 * which Chroma cannot tell from an absent field, and ranges over strings, which it does not order).
 */
export function chromaMetadataLeaf(node: Extract<FilterNode, { kind: 'compare' | 'in' }>): Where {
  if (node.kind === 'in') {
    const items = node.values.map((value) => equalTo(node.column, value));
    return items.length === 1 && items[0] !== undefined ? items[0] : { $or: items };
  }
  switch (node.op) {
    case '=': return equalTo(node.column, node.value);
    case '<': return { [node.column]: { $lt: node.value } };
    case '<=': return { [node.column]: { $lte: node.value } };
    case '>': return { [node.column]: { $gt: node.value } };
    case '>=': return { [node.column]: { $gte: node.value } };
    case '<>': throw new Error('negated metadata leaves are refused before this');
  }
}
