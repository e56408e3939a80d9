/** The values and comparisons of a filter (shared/filter-tree.ts), apart so shared/filter-metadata.ts can use them without importing the parser. */
export type Literal = string | number | boolean;
export type CompareOp = '=' | '<>' | '<' | '<=' | '>' | '>=';
