import { ErrorCode, ShoalError } from '../../protocol/errors.js';

/*
 * Table and collection names, apart from the rest of table-spec.ts: every backend's URI parser
 * checks them, and the backends are imported by every command (through the settings table), so
 * this module stays free of the spec's and vectors' code.
 */

/**
 * Endings of the relations a table T keeps beside itself: `T__documents` (states, every backend),
 * `T__spec` (pgvector), and pgvector's index names `T__source`, `T__hnsw` and `T__text` (indexes share the
 * table namespace in PostgreSQL). A table named like one of them would be written into another
 * table's state table (a schema error at its first commit, and `--prune` of the other table
 * deleting its rows by source), so such names are refused.
 */
export const RESERVED_TABLE_SUFFIXES: readonly string[] = Object.freeze(['__documents', '__spec', '__source', '__hnsw', '__text']);

/** The reserved ending `name` has, or undefined. */
export function reservedSuffixOf(name: string): string | undefined {
  return RESERVED_TABLE_SUFFIXES.find((suffix) => name.endsWith(suffix));
}

/** INVALID_INPUT for a name ending like another table's own relations (RESERVED_TABLE_SUFFIXES). */
function checkNotReserved(name: string): string {
  const suffix = reservedSuffixOf(name);
  if (suffix !== undefined) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `table name ${JSON.stringify(name)}: a name ending in ${suffix} is the ${suffix === '__documents' ? 'state table' : 'spec or an index'} of table ${JSON.stringify(name.slice(0, -suffix.length))}; choose another name`);
  }
  return name;
}

/** A LanceDB table name: up to 128 letters, digits, '_' or '-' (LanceDB's own rule), not a reserved ending (`T__documents` is table T's state table). */
export function checkLanceDbTableName(name: string): string {
  if (!/^[A-Za-z0-9_-]{1,128}$/.test(name)) throw new ShoalError(ErrorCode.INVALID_INPUT, `table name ${JSON.stringify(name)}: use letters, digits, '_' or '-'`);
  return checkNotReserved(name);
}

/** Table and collection names every backend accepts (the LanceDB rule, a safe SQL identifier once quoted). */
export function checkTableName(name: string): string {
  if (!/^[A-Za-z0-9_-]{1,48}$/.test(name)) throw new ShoalError(ErrorCode.INVALID_INPUT, `table name ${JSON.stringify(name)}: use 1 to 48 letters, digits, '_' or '-'`);
  return checkNotReserved(name);
}
