import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { siblingModule, spawnThread } from '../../adapters/support/spawn-thread.js';
import { ThreadClient } from '../../adapters/support/thread-rpc.js';
import type { PackedMatrix, TopK } from './matrix.js';
import type { SearchRequest, SearchResponse } from './search-messages.js';

/**
 * The main-thread side of the search thread: registers category matrices (shared memory, no
 * copy) and sends batches of query vectors (transferred) for their top-k rows. One thread is
 * enough: encoding products costs far more than scanning categories, and the scan of one batch
 * overlaps the encoding of the next.
 */

export class SearchThread {
  #client: ThreadClient<SearchRequest, SearchResponse> | null = null;
  readonly #loaded = new Set<string>();

  #thread(): ThreadClient<SearchRequest, SearchResponse> {
    if (this.#client === null || !this.#client.alive) {
      this.#client = new ThreadClient(spawnThread(siblingModule(import.meta.url, 'search-thread')), { name: 'category search thread' });
      this.#loaded.clear();
    }
    return this.#client;
  }

  /** Makes `matrix` searchable under `key`; its data must live in a SharedArrayBuffer. */
  async load(key: string, matrix: PackedMatrix): Promise<void> {
    if (this.#loaded.has(key)) return;
    const buffer = matrix.data.buffer;
    if (!(buffer instanceof SharedArrayBuffer)) throw new ShoalError(ErrorCode.INTERNAL, 'category matrices must be in shared memory');
    await this.#thread().request({ kind: 'load', key, buffer, rows: matrix.rows, dim: matrix.dim });
    this.#loaded.add(key);
  }

  async search(key: string, queries: Float32Array<ArrayBuffer>, count: number, k: number): Promise<TopK> {
    const answer = await this.#thread().request({ kind: 'search', key, queries, count, k }, [queries.buffer]);
    if (answer.kind !== 'found') throw new ShoalError(ErrorCode.INTERNAL, `search thread answered ${answer.kind} to a search`);
    return answer;
  }

  async close(): Promise<void> {
    const client = this.#client;
    this.#client = null;
    this.#loaded.clear();
    await client?.close();
  }
}
