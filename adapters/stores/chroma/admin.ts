import { ChromaClient, type Collection } from 'chromadb';
import { classify, type ChromaStoreOptions, type Place } from './store.js';
import { boundChromaRequests, checkRequestTimeout, DEFAULT_CHROMA_REQUEST_TIMEOUT_MS } from './requests.js';
import { userTables, type IndexAdmin, type TableEntry } from '../shared/index-admin.js';

/**
 * IndexAdmin of a Chroma server (chroma/store.ts): the collections of the tenant and database whose
 * metadata carries a Shoal spec (`shoal:spec`), so other applications' collections on the same
 * server are not listed, with their record counts. Chroma does not say what a collection takes on
 * disk: sizes are null.
 */

const PAGE = 100;

export class ChromaAdmin implements IndexAdmin {
  readonly #client: ChromaClient;
  readonly #place: Place;

  constructor(options: Omit<ChromaStoreOptions, 'collection' | 'batchRows'>) {
    const where = `chroma://${options.host}:${options.port}`;
    const timeoutMs = checkRequestTimeout(options.requestTimeoutMs ?? DEFAULT_CHROMA_REQUEST_TIMEOUT_MS, where);
    this.#place = { where, timeoutMs };
    this.#client = new ChromaClient({
      host: options.host,
      port: options.port,
      ssl: options.ssl ?? false,
      ...(options.tenant === undefined ? {} : { tenant: options.tenant }),
      ...(options.database === undefined ? {} : { database: options.database }),
      ...(options.headers === undefined ? {} : { headers: options.headers }),
    });
    boundChromaRequests(this.#client, timeoutMs);
  }

  async tables(): Promise<TableEntry[]> {
    try {
      const shoal = new Map<string, Collection>();
      for (let offset = 0; ; offset += PAGE) {
        const page = await this.#client.listCollections({ limit: PAGE, offset });
        for (const collection of page) if (typeof collection.metadata?.['shoal:spec'] === 'string') shoal.set(collection.name, collection);
        if (page.length < PAGE) break;
      }
      const out: TableEntry[] = [];
      for (const name of userTables(shoal.keys())) {
        const collection = shoal.get(name);
        if (collection !== undefined) out.push({ name, rows: await collection.count() });
      }
      return out;
    } catch (error) {
      throw classify(error, 'list collections', this.#place);
    }
  }

  async sizeBytes(_table: string): Promise<number | null> {
    return null;
  }

  async close(): Promise<void> {
    // The client holds no connection of its own.
  }
}
