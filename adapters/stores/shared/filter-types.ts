/** The values and comparisons of a filter (filter-tree.ts), apart so filter-metadata.ts can use them without importing the parser. */
export type Literal = string | number | boolean;
export type CompareOp = '=' | '<>' | '<' | '<=' | '>' | '>=';
