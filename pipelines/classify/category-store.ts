import { hasErrorCode, ErrorCode } from '../../adapters/protocol/errors.js';
import type { PayloadStore } from '../../adapters/nats/connection/payloads.js';
import { withNatsRetry } from '../../adapters/nats/connection/nats-retry.js';
import type { SharedCategories } from './category-index.js';

/**
 * Category matrices in this deployment's object store, shared by every classify worker:
 * `obj://<p>_payloads/classify/categories/<key>.f32` (the float32 rows) and `<key>.json` (their
 * description, written last), keyed as the local cache is (category-index.ts: the taxonomy's
 * content hash, the model and its weights' fingerprint, the template, role, prompt and maximum
 * length). A worker that finds a matrix there reads it instead of embedding thousands of
 * categories; the first to build it stores it. They live as long as the bucket keeps objects
 * (the topology's payload max age, 7 days by default).
 */

export class ObjectStoreCategories implements SharedCategories {
  readonly #payloads: PayloadStore;
  readonly #name: (key: string) => string;

  /** `name` maps a key to its object name without extension (classifyJobNames().categoriesObject). */
  constructor(payloads: PayloadStore, name: (key: string) => string) {
    this.#payloads = payloads;
    this.#name = name;
  }

  where(key: string): string {
    return `obj://${this.#payloads.bucket}/${this.#name(key)}`;
  }

  async get(key: string): Promise<{ matrix: Uint8Array; meta: string } | null> {
    const base = this.where(key);
    try {
      const meta = await withNatsRetry(`read ${base}.json`, () => this.#payloads.get(`${base}.json`));
      // Read whole (up to the payload limit, 512 MiB: 10,595 categories × 384 dimensions are 16 MB).
      const matrix = await withNatsRetry(`read ${base}.f32`, () => this.#payloads.get(`${base}.f32`));
      return { matrix, meta: Buffer.from(meta).toString('utf8') };
    } catch (error) {
      // Not there (never built, or expired): built by the caller. Anything else is an outage, retried by the caller.
      if (hasErrorCode(error, ErrorCode.INVALID_INPUT)) return null;
      throw error;
    }
  }

  async put(key: string, matrix: Uint8Array, meta: string): Promise<void> {
    const name = this.#name(key);
    // The matrix first, its description last: a reader that finds the description finds the matrix.
    await withNatsRetry(`store ${name}.f32`, () => this.#payloads.put(`${name}.f32`, matrix));
    await withNatsRetry(`store ${name}.json`, () => this.#payloads.put(`${name}.json`, new TextEncoder().encode(meta)));
  }
}
