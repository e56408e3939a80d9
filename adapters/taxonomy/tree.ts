import { createHash } from 'node:crypto';
import { ErrorCode, ShoalError } from '../protocol/errors.js';

/**
 * A taxonomy as a tree of categories, each with its id, its full path of names from the top
 * level down, its depth (1 = top level) and its parent. Categories are kept in a flat array
 * (parents before children) so matrices of category vectors can be indexed by position.
 */

/** How the names of a path are joined in `pathText` (and in every taxonomy file format). */
export const PATH_SEPARATOR = ' > ';

export const TaxonomyFormat = {
  /** `gid://shopify/TaxonomyCategory/aa-1 : Apparel & Accessories > Clothing` (and other `ID : A > B` exports). */
  shopify: 'shopify',
  /** `166 - Apparel & Accessories > Clothing` */
  google: 'google',
  /** `Apparel & Accessories > Clothing`: the path is the id. */
  plain: 'plain',
  /** Built from a list of labels (one level). */
  labels: 'labels',
} as const;
export type TaxonomyFormat = (typeof TaxonomyFormat)[keyof typeof TaxonomyFormat];

export interface Category {
  /** Position in `Taxonomy.categories` (and the row of the category in a vector matrix). */
  readonly index: number;
  readonly id: string;
  /** Names from the top level down; the last is the category's own name. */
  readonly path: readonly string[];
  /** `path` joined with ' > '. */
  readonly pathText: string;
  /** 1 for a top-level category. */
  readonly depth: number;
  /** Index of the parent, -1 for a top-level category. */
  readonly parent: number;
}

export interface Taxonomy {
  readonly format: TaxonomyFormat;
  readonly categories: readonly Category[];
  readonly byId: ReadonlyMap<string, number>;
  readonly byPath: ReadonlyMap<string, number>;
  /** Children of each category (by index); `roots` are the top-level ones. */
  readonly children: readonly (readonly number[])[];
  readonly roots: readonly number[];
  readonly maxDepth: number;
  /** SHA-256 (hex) of the ids and paths: the identity of the taxonomy in caches. */
  readonly hash: string;
}

export interface TaxonomyEntry {
  id: string;
  path: readonly string[];
}

/** Splits `A > B > C` into names, trimming each; empty names are refused. */
export function splitPath(text: string, where: string): string[] {
  const names = text.split('>').map((name) => name.trim());
  if (names.length === 0 || names.some((name) => name.length === 0)) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `${where}: "${text.slice(0, 200)}" is not a path of names separated by '>'`);
  }
  return names;
}

/**
 * Builds the tree from entries in any order. A missing ancestor (a file that lists leaves only)
 * is added with its path as id; a repeated id or path is an error, since the same category twice
 * would get two vectors and split its votes.
 */
export function buildTaxonomy(entries: readonly TaxonomyEntry[], format: TaxonomyFormat, options: { maxDepth?: number | undefined } = {}): Taxonomy {
  const maxDepth = options.maxDepth ?? Number.POSITIVE_INFINITY;
  if (!(maxDepth >= 1)) throw new ShoalError(ErrorCode.INVALID_INPUT, `max depth must be at least 1 (got ${maxDepth})`);
  const given = new Map<string, string>();
  const ids = new Set<string>();
  // Each path's names, as given: a flat label that contains ' > ' is one name, not a path.
  const namesOf = new Map<string, readonly string[]>();
  // A deeper category trimmed by maxDepth still implies its ancestors down to maxDepth.
  const implied = new Set<string>();
  for (const entry of entries) {
    if (entry.path.length > maxDepth) {
      const kept = entry.path.slice(0, maxDepth);
      implied.add(kept.join(PATH_SEPARATOR));
      namesOf.set(kept.join(PATH_SEPARATOR), kept);
      continue;
    }
    const key = entry.path.join(PATH_SEPARATOR);
    namesOf.set(key, entry.path);
    if (given.has(key)) throw new ShoalError(ErrorCode.INVALID_INPUT, `taxonomy lists the path "${key}" twice`);
    if (ids.has(entry.id)) throw new ShoalError(ErrorCode.INVALID_INPUT, `taxonomy lists the id "${entry.id}" twice`);
    given.set(key, entry.id);
    ids.add(entry.id);
  }
  if (given.size === 0 && implied.size === 0) throw new ShoalError(ErrorCode.INVALID_INPUT, 'taxonomy has no categories');
  // Every ancestor path too, then sort so parents come first and order is stable (file order is not).
  const paths = new Map<string, string[]>();
  for (const key of new Set([...given.keys(), ...implied])) {
    const names = namesOf.get(key) ?? key.split(PATH_SEPARATOR);
    for (let depth = 1; depth <= names.length; depth++) {
      const prefix = names.slice(0, depth);
      const prefixKey = prefix.join(PATH_SEPARATOR);
      if (!paths.has(prefixKey)) paths.set(prefixKey, prefix);
    }
  }
  const ordered = [...paths.entries()].sort(([a, pa], [b, pb]) => pa.length - pb.length || (a < b ? -1 : a > b ? 1 : 0));
  const categories: Category[] = [];
  const byId = new Map<string, number>();
  const byPath = new Map<string, number>();
  for (const [key, names] of ordered) {
    const id = given.get(key) ?? key;
    if (byId.has(id)) throw new ShoalError(ErrorCode.INVALID_INPUT, `taxonomy id "${id}" names two categories`);
    const parent = names.length === 1 ? -1 : (byPath.get(names.slice(0, -1).join(PATH_SEPARATOR)) ?? -1);
    const category: Category = Object.freeze({ index: categories.length, id, path: Object.freeze(names), pathText: key, depth: names.length, parent });
    byId.set(id, category.index);
    byPath.set(key, category.index);
    categories.push(category);
  }
  const children: number[][] = categories.map(() => []);
  const roots: number[] = [];
  for (const category of categories) {
    if (category.parent === -1) roots.push(category.index);
    else children[category.parent]?.push(category.index);
  }
  const hash = createHash('sha256');
  for (const category of categories) hash.update(`${category.id}\t${category.pathText}\n`);
  return Object.freeze({
    format,
    categories: Object.freeze(categories),
    byId,
    byPath,
    children: Object.freeze(children.map((list) => Object.freeze(list))),
    roots: Object.freeze(roots),
    maxDepth: categories.reduce((max, category) => Math.max(max, category.depth), 0),
    hash: hash.digest('hex'),
  });
}

/** A one-level taxonomy of labels (the `labels` form of the classify API); each label is its own id, a repeated label counts once. */
export function labelsTaxonomy(labels: readonly string[]): Taxonomy {
  const seen = new Set<string>();
  const unique: string[] = [];
  for (const label of labels) {
    if (label.trim() === '') throw new ShoalError(ErrorCode.INVALID_INPUT, `labels: label ${unique.length + 1} is blank`);
    if (seen.has(label.trim())) continue;
    seen.add(label.trim());
    unique.push(label);
  }
  return buildTaxonomy(
    unique.map((label) => ({ id: label, path: [label.trim()] })),
    TaxonomyFormat.labels,
  );
}

/** Indexes of `category` and its ancestors, top level first. */
export function lineage(taxonomy: Taxonomy, index: number): number[] {
  const out: number[] = [];
  for (let at = index; at !== -1; at = taxonomy.categories[at]?.parent ?? -1) out.push(at);
  return out.reverse();
}
