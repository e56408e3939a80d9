import { QdrantClient } from '@qdrant/js-client-rest';
import { userTables, type IndexAdmin, type TableEntry } from '../shared/index-admin.js';
import { classify, type QdrantStoreOptions } from './store.js';

/**
 * IndexAdmin of a Qdrant server (qdrant/store.ts): the collections T that have their state collection
 * `T__documents` beside them (where Shoal keeps T's spec), so other applications' collections are
 * not listed, with their exact point counts. Qdrant does not say what a collection takes on disk:
 * sizes are null.
 */

export class QdrantAdmin implements IndexAdmin {
  readonly #client: QdrantClient;

  constructor(options: Omit<QdrantStoreOptions, 'collection' | 'batchRows'>) {
    this.#client = new QdrantClient({
      host: options.host,
      port: options.port,
      https: options.https ?? false,
      ...(options.apiKey === undefined ? {} : { apiKey: options.apiKey }),
      checkCompatibility: false,
      timeout: options.requestTimeoutMs ?? 60_000,
    });
  }

  async tables(): Promise<TableEntry[]> {
    try {
      const all = new Set((await this.#client.getCollections()).collections.map((collection) => collection.name));
      const out: TableEntry[] = [];
      for (const name of userTables(all).filter((candidate) => all.has(`${candidate}__documents`))) {
        out.push({ name, rows: (await this.#client.count(name, { exact: true })).count });
      }
      return out;
    } catch (error) {
      throw classify(error, 'list collections');
    }
  }

  async sizeBytes(_table: string): Promise<number | null> {
    return null;
  }

  async close(): Promise<void> {
    // REST calls only: nothing held open.
  }
}
