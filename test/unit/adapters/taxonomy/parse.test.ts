import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { labelsTaxonomy, lineage, loadTaxonomyFile, parseTaxonomy } from '../../../../adapters/taxonomy/index.js';
import { DATA_DIR, sharedAvailable } from '../../../helpers/shared.js';

/** Taxonomy files (Shopify, Google, plain) into a tree: ids, full paths, depth, parents, --max-depth. */

const SHOPIFY = join(DATA_DIR, 'taxonomy', 'shopify-categories.txt');
const GOOGLE = join(DATA_DIR, 'taxonomy', 'google-taxonomy-with-ids.en-US.txt');

describe('taxonomy files', () => {
  it('parses the Shopify format (and its ID : path text export) into a tree', () => {
    const taxonomy = parseTaxonomy(
      [
        '# Shopify Product Taxonomy',
        'gid://shopify/TaxonomyCategory/aa     : Apparel & Accessories',
        'gid://shopify/TaxonomyCategory/aa-1   : Apparel & Accessories > Clothing',
        'gid://shopify/TaxonomyCategory/aa-1-1 : Apparel & Accessories > Clothing > Shirts',
        '',
        'gid://shopify/TaxonomyCategory/hg     : Home & Garden',
      ].join('\n'),
    );
    expect(taxonomy.format).toBe('shopify');
    expect(taxonomy.categories.map((c) => [c.id, c.pathText, c.depth])).toEqual([
      ['gid://shopify/TaxonomyCategory/aa', 'Apparel & Accessories', 1],
      ['gid://shopify/TaxonomyCategory/hg', 'Home & Garden', 1],
      ['gid://shopify/TaxonomyCategory/aa-1', 'Apparel & Accessories > Clothing', 2],
      ['gid://shopify/TaxonomyCategory/aa-1-1', 'Apparel & Accessories > Clothing > Shirts', 3],
    ]);
    const shirts = taxonomy.byId.get('gid://shopify/TaxonomyCategory/aa-1-1') ?? -1;
    expect(lineage(taxonomy, shirts).map((i) => taxonomy.categories[i]?.path.at(-1))).toEqual(['Apparel & Accessories', 'Clothing', 'Shirts']);
    expect(taxonomy.roots.map((i) => taxonomy.categories[i]?.id)).toEqual(['gid://shopify/TaxonomyCategory/aa', 'gid://shopify/TaxonomyCategory/hg']);
    expect(parseTaxonomy('aa-1 : Apparel > Clothing\naa : Apparel').byId.get('aa-1')).toBe(1);
  });

  it('parses the Google format and plain paths (ancestors added with their path as id)', () => {
    const google = parseTaxonomy('# Google_Product_Taxonomy_Version: 2021-09-21\n1 - Animals & Pet Supplies\n3237 - Animals & Pet Supplies > Live Animals\n');
    expect(google.format).toBe('google');
    expect(google.categories.map((c) => [c.id, c.depth, c.parent])).toEqual([['1', 1, -1], ['3237', 2, 0]]);
    const plain = parseTaxonomy('Home > Kitchen > Knives\r\nHome > Garden\n');
    expect(plain.format).toBe('plain');
    expect(plain.categories.map((c) => c.id)).toEqual(['Home', 'Home > Garden', 'Home > Kitchen', 'Home > Kitchen > Knives']);
    expect(plain.maxDepth).toBe(3);
    expect(parseTaxonomy('Home > Kitchen > Knives\nHome > Garden', { maxDepth: 2 }).categories.map((c) => c.id)).toEqual(['Home', 'Home > Garden', 'Home > Kitchen']);
    expect(labelsTaxonomy(['sports', 'news', 'sports']).categories.map((c) => [c.id, c.depth])).toEqual([['news', 1], ['sports', 1]]);
  });

  it('refuses a line in another format, a repeated path and an empty name, naming the line', () => {
    expect(() => parseTaxonomy('1 - A\nA > B')).toThrow(/line 2: expected "ID - A > B"/);
    expect(() => parseTaxonomy('A > B\nA > B')).toThrow(expect.objectContaining({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('twice') }));
    expect(() => parseTaxonomy('A >  > B')).toThrow(/line 1/);
    expect(() => parseTaxonomy('# only a comment')).toThrow(/no category lines/);
  });

  it('refuses JSON Lines (a catalog given as the taxonomy) with the line and what a taxonomy looks like, on any line', () => {
    const json = expect.objectContaining({ code: ErrorCode.INVALID_INPUT, message: expect.stringMatching(/line 1: "\{"id":1,"text":"x"\}" is a JSON object .*one category per line: "ID : A > B" \(Shopify\)/) });
    expect(() => parseTaxonomy('{"id":1,"text":"x"}\n{"id":2,"text":"y"}\n')).toThrow(json);
    // A spaced record would otherwise read as a Shopify "ID : A > B" line.
    expect(() => parseTaxonomy('{"id" : 1}')).toThrow(/line 1: .* is a JSON object/);
    expect(() => parseTaxonomy('# comment\n["Apparel", "Shoes"]')).toThrow(/line 2: .* is a JSON array/);
    expect(() => parseTaxonomy('Apparel > Shoes\n{"path":"Home"}')).toThrow(/line 2: .* is a JSON object/);
    // Brackets that are no JSON stay category names.
    expect(parseTaxonomy('[Unbranded] > Shoes\n{Sale} > Lamps').categories.map((category) => category.pathText).sort()).toEqual(['[Unbranded]', '[Unbranded] > Shoes', '{Sale}', '{Sale} > Lamps']);
  });

  it.skipIf(!sharedAvailable(SHOPIFY) || !sharedAvailable(GOOGLE))('reads the shared Shopify (10,595) and Google (5,595) taxonomies', async () => {
    const shopify = await loadTaxonomyFile(SHOPIFY);
    expect(shopify.format).toBe('shopify');
    expect(shopify.categories).toHaveLength(10_595);
    expect(shopify.roots).toHaveLength(26);
    expect(shopify.maxDepth).toBe(8);
    const google = await loadTaxonomyFile(GOOGLE);
    expect(google.format).toBe('google');
    expect(google.categories).toHaveLength(5_595);
    expect(google.categories[google.byId.get('3237') ?? -1]?.pathText).toBe('Animals & Pet Supplies > Live Animals');
    const top = await loadTaxonomyFile(GOOGLE, { maxDepth: 1 });
    expect(top.categories).toHaveLength(google.roots.length);
    // Every category's parent is its path minus the last name.
    for (const category of shopify.categories) {
      if (category.parent === -1) expect(category.depth).toBe(1);
      else expect(shopify.categories[category.parent]?.path).toEqual(category.path.slice(0, -1));
    }
  });
});
