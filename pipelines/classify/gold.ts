import type { Taxonomy } from '../../adapters/taxonomy/index.js';

/**
 * A gold label as a path of names: a category id of the taxonomy, or a path (`A > B` or, as in
 * scraped category trees, `A >> B >> product name`) cut to its longest prefix that is a
 * category, so trailing names the taxonomy does not have (product names) do not count as levels.
 * A path with no known prefix is kept as given (it scores as a miss at every level).
 */
export function goldPath(taxonomy: Taxonomy, value: string): string[] {
  const trimmed = value.trim();
  const byId = taxonomy.byId.get(trimmed);
  if (byId !== undefined) return [...(taxonomy.categories[byId]?.path ?? [])];
  const names = trimmed
    .split(/>>|>/)
    .map((name) => name.trim())
    .filter((name) => name.length > 0);
  for (let depth = names.length; depth > 0; depth--) {
    const index = taxonomy.byPath.get(names.slice(0, depth).join(' > '));
    if (index !== undefined) return [...(taxonomy.categories[index]?.path ?? [])];
  }
  return names;
}
