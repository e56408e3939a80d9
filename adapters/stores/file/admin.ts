import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { diskUsage, userTables, type IndexAdmin, type TableEntry } from '../shared/index-admin.js';
import { JsonlStore } from './store.js';

/**
 * IndexAdmin of a `file:///dir` index (file/store.ts): each table is a folder `DIR/TABLE/` holding its
 * `_spec.json`; rows are counted by the table's own sink, sizes are the folder's bytes.
 */

export class JsonlAdmin implements IndexAdmin {
  readonly #dir: string;

  constructor(options: { dir: string }) {
    this.#dir = options.dir;
  }

  async tables(): Promise<TableEntry[]> {
    if (!existsSync(this.#dir)) return [];
    const entries = await readdir(this.#dir, { withFileTypes: true });
    const names = userTables(entries.filter((entry) => entry.isDirectory() && existsSync(join(this.#dir, entry.name, '_spec.json'))).map((entry) => entry.name));
    const out: TableEntry[] = [];
    for (const name of names) {
      const sink = new JsonlStore({ dir: this.#dir, table: name });
      try {
        out.push({ name, rows: await sink.count() });
      } finally {
        await sink.close();
      }
    }
    return out;
  }

  async sizeBytes(table: string): Promise<number | null> {
    return diskUsage(join(this.#dir, table));
  }

  async close(): Promise<void> {
    // Files only: nothing held open.
  }
}
