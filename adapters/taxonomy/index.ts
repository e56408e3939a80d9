/** Taxonomies: file formats (Shopify, Google, plain) parsed into a tree of categories. */
export { loadTaxonomyFile, parseTaxonomy, MAX_TAXONOMY_BYTES, type ParseTaxonomyOptions } from './parse.js';
export { buildTaxonomy, labelsTaxonomy, lineage, splitPath, PATH_SEPARATOR, TaxonomyFormat, type Category, type Taxonomy, type TaxonomyEntry } from './tree.js';
