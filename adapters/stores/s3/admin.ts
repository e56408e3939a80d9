import { folderPrefix, joinKey, parseS3Uri, S3Store, type S3SettingsInput } from '../../object-store/index.js';
import { userTables, type IndexAdmin, type TableEntry } from '../shared/index-admin.js';
import { S3JsonStore } from './store.js';

/**
 * IndexAdmin of an `s3://bucket/prefix` index (s3/store.ts): each table is a folder `prefix/TABLE/`
 * holding its `spec.json`; rows are counted by the table's own sink (which reads its row objects),
 * sizes are the sum of the table's object sizes.
 */

export class S3Admin implements IndexAdmin {
  readonly #uri: string;
  readonly #bucket: string;
  readonly #key: string;
  readonly #store: S3Store;

  constructor(options: { uri: string; s3?: S3SettingsInput }) {
    const location = parseS3Uri(options.uri);
    this.#uri = options.uri;
    this.#bucket = location.bucket;
    this.#key = location.key;
    this.#store = new S3Store(options.s3 ?? {});
  }

  async tables(): Promise<TableEntry[]> {
    const prefix = folderPrefix(this.#key);
    const names: string[] = [];
    for await (const object of this.#store.listFolder({ bucket: this.#bucket, key: this.#key })) {
      const rest = object.key.slice(prefix.length).split('/');
      if (rest.length === 2 && rest[1] === 'spec.json' && rest[0] !== undefined && rest[0] !== '') names.push(rest[0]);
    }
    const out: TableEntry[] = [];
    for (const name of userTables(names)) {
      const sink = new S3JsonStore({ uri: this.#uri, table: name, store: this.#store });
      try {
        out.push({ name, rows: await sink.count() });
      } finally {
        await sink.close();
      }
    }
    return out;
  }

  async sizeBytes(table: string): Promise<number | null> {
    let total = 0;
    let found = false;
    for await (const object of this.#store.listFolder({ bucket: this.#bucket, key: joinKey(this.#key, table) })) {
      total += object.size;
      found = true;
    }
    return found ? total : null;
  }

  async close(): Promise<void> {
    this.#store.close();
  }
}
