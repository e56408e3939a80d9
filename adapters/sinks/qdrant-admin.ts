import { QdrantClient } from '@qdrant/js-client-rest';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { userTables, type IndexAdmin, type TableEntry } from './index-admin.js';
import type { QdrantSinkOptions } from './qdrant.js';

/**
 * IndexAdmin of a Qdrant server (qdrant.ts): the collections T that have their state collection
 * `T__documents` beside them (where Shoal keeps T's spec), so other applications' collections are
 * not listed, with their exact point counts. Qdrant does not say what a collection takes on disk:
 * sizes are null.
 */

function classify(error: unknown, what: string): ShoalError {
  if (error instanceof ShoalError) return error;
  const message = error instanceof Error ? error.message : String(error);
  const name = error instanceof Error ? error.name : '';
  if (name === 'QdrantClientTimeoutError' || name === 'AbortError' || name === 'TimeoutError') return new ShoalError(ErrorCode.TIMEOUT, `qdrant ${what}: no answer within the request timeout`, { cause: error });
  const status = typeof error === 'object' && error !== null && 'status' in error ? Number(error.status) : 0;
  const transient = status === 429 || status >= 500 || /fetch failed|ECONNREFUSED|ECONNRESET|socket hang up|timeout/i.test(message);
  return new ShoalError(transient ? ErrorCode.UNAVAILABLE : ErrorCode.INTERNAL, `qdrant ${what}: ${message}`, { cause: error });
}

export class QdrantAdmin implements IndexAdmin {
  readonly #client: QdrantClient;

  constructor(options: Omit<QdrantSinkOptions, 'collection' | 'batchRows'>) {
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
