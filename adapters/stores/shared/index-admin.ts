import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { reservedSuffixOf } from './table-spec.js';

/**
 * What `shoal index` and the gateway's /v1/indexes routes ask of a store beyond the Store: the
 * tables an index holds and what their storage takes. A Store is one table; an IndexAdmin is the
 * store it lives in (a LanceDB folder, a PostgreSQL database, a Chroma or Qdrant server, a
 * file:// folder, an s3:// prefix). Per-document work (states, counts, deletion) stays on the
 * Store, which every backend already implements; this interface holds only what a Store cannot say.
 * One implementation per backend (`*-admin.ts`), opened through `OpenedStore.openAdmin()`.
 */

export interface TableEntry {
  /** The table or collection name (`--table`). */
  name: string;
  /** Chunk rows it holds. */
  rows: number;
}

export interface IndexAdmin {
  /**
   * The tables of the index that Shoal wrote (a table's own relations, `T__documents` and the
   * like, are not listed), by name, with their row counts. An index that does not exist yet has none.
   */
  tables(): Promise<TableEntry[]>;
  /**
   * Bytes the table (its rows, states and spec) takes in the store, where the store tells: the
   * LanceDB and file:// folders, PostgreSQL's relation sizes, the S3 objects. Null where it does
   * not (Chroma, Qdrant) or when the table does not exist.
   */
  sizeBytes(table: string): Promise<number | null>;
  close(): Promise<void>;
}

/** Names as the tables listing shows them: Shoal's own relations left out, sorted. */
export function userTables(names: Iterable<string>): string[] {
  return [...new Set(names)].filter((name) => reservedSuffixOf(name) === undefined).sort();
}

/** Total bytes of the files under `path` (a file or a folder, recursively); null when it does not exist. */
export async function diskUsage(path: string): Promise<number | null> {
  const info = await stat(path).catch(() => null);
  if (info === null) return null;
  if (!info.isDirectory()) return info.size;
  let total = 0;
  for (const entry of await readdir(path, { withFileTypes: true })) {
    // Links are not followed: the size is what the index itself holds.
    if (entry.isSymbolicLink()) continue;
    total += (await diskUsage(join(path, entry.name))) ?? 0;
  }
  return total;
}
