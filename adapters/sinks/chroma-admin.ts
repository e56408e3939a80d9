import { ChromaClient } from 'chromadb';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import type { ChromaSinkOptions } from './chroma.js';
import { boundChromaRequests, checkRequestTimeout, DEFAULT_CHROMA_REQUEST_TIMEOUT_MS, isRequestTimeout } from './chroma-requests.js';
import { userTables, type IndexAdmin, type TableEntry } from './index-admin.js';

/**
 * IndexAdmin of a Chroma server (chroma.ts): the collections of the tenant and database whose
 * metadata carries a Shoal spec (`shoal:spec`), so other applications' collections on the same
 * server are not listed, with their record counts. Chroma does not say what a collection takes on
 * disk: sizes are null.
 */

const PAGE = 100;

function classify(error: unknown, what: string): ShoalError {
  if (error instanceof ShoalError) return error;
  if (isRequestTimeout(error)) return new ShoalError(ErrorCode.TIMEOUT, `chroma ${what}: no answer within the request timeout`, { cause: error });
  const message = error instanceof Error ? error.message : String(error);
  const transient = /fetch failed|ECONNREFUSED|ECONNRESET|socket hang up|Failed to connect/i.test(message);
  return new ShoalError(transient ? ErrorCode.UNAVAILABLE : ErrorCode.INTERNAL, `chroma ${what}: ${message}`, { cause: error });
}

export class ChromaAdmin implements IndexAdmin {
  readonly #client: ChromaClient;

  constructor(options: Omit<ChromaSinkOptions, 'collection' | 'batchRows'>) {
    const timeoutMs = checkRequestTimeout(options.requestTimeoutMs ?? DEFAULT_CHROMA_REQUEST_TIMEOUT_MS, `chroma://${options.host}:${options.port}`);
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
      const shoal = new Map<string, Awaited<ReturnType<ChromaClient['listCollections']>>[number]>();
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
      throw classify(error, 'list collections');
    }
  }

  async sizeBytes(_table: string): Promise<number | null> {
    return null;
  }

  async close(): Promise<void> {
    // The client holds no connection of its own.
  }
}
