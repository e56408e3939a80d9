import { existsSync, statSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { diskUsage, userTables, type IndexAdmin, type TableEntry } from '../shared/index-admin.js';

/**
 * IndexAdmin of a LanceDB folder (lancedb/store.ts): each table is a `<name>.lance` folder, its states
 * `<name>__documents.lance` beside it. Tables are found by reading the folder, so listing a folder
 * that holds none (a mistyped --index) connects to nothing and writes nothing there (connecting
 * makes LanceDB add its own files); sizes are the bytes of both folders.
 */

const TABLE_SUFFIX = '.lance';

export class LanceDbAdmin implements IndexAdmin {
  readonly #dir: string;
  #db: lancedb.Connection | null = null;

  constructor(options: { dir: string }) {
    this.#dir = options.dir;
  }

  async #names(): Promise<string[]> {
    if (!existsSync(this.#dir)) return [];
    if (!statSync(this.#dir).isDirectory()) throw new ShoalError(ErrorCode.CONFIG_INVALID, `index ${this.#dir} is a file, not a folder: a LanceDB index is a folder`);
    const entries = await readdir(this.#dir, { withFileTypes: true });
    return userTables(entries.filter((entry) => entry.isDirectory() && entry.name.endsWith(TABLE_SUFFIX)).map((entry) => entry.name.slice(0, -TABLE_SUFFIX.length)));
  }

  async tables(): Promise<TableEntry[]> {
    const names = await this.#names();
    if (names.length === 0) return [];
    this.#db ??= await lancedb.connect(this.#dir);
    const db = this.#db;
    const known = new Set(await db.tableNames());
    const out: TableEntry[] = [];
    for (const name of names.filter((candidate) => known.has(candidate))) {
      const table = await db.openTable(name);
      try {
        out.push({ name, rows: await table.countRows() });
      } finally {
        table.close();
      }
    }
    return out;
  }

  async sizeBytes(table: string): Promise<number | null> {
    const rows = await diskUsage(join(this.#dir, `${table}${TABLE_SUFFIX}`));
    if (rows === null) return null;
    return rows + ((await diskUsage(join(this.#dir, `${table}__documents${TABLE_SUFFIX}`))) ?? 0);
  }

  async close(): Promise<void> {
    this.#db?.close();
    this.#db = null;
  }
}
