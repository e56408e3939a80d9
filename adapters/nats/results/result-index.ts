import type { z } from 'zod';
import type { JobPartResult, PrimitiveResult } from '../../protocol/jobs.js';
import type { ItemId } from '../../protocol/requests.js';
import type { ChunkRow, DocumentState, Store } from '../../stores/store.js';

/**
 * Job results into a vector store (`shoal sink --index URI`): each part of an encode job becomes
 * one committed batch of rows, through the same Store every backend implements.
 *
 * Rows: `id` = the item's own id when the request gave one (so a row joins back to the caller's
 * document, and re-encoding the document in a later job replaces its vector), else
 * `<job_id>:<index>` (the job-wide item index): deterministic either way, so a redelivered
 * result upserts the same ids and never adds a row. Metadata: `document_id` = the job id, `page`
 * = the part, `chunk` = the item's job-wide index, `settings` = the model, `source` =
 * `shoal-job://<job>/part-<n>` (one source per part, because a commit deletes rows of its sources
 * that it does not carry: one source per job would let part 1 delete part 0). `text` is the item's
 * input text when the result carries it (the worker adds it for jobs whose target is an index,
 * since the request leaves the work-queue stream once acked), else empty (`shoal sink --index`
 * over jobs with a stream target: results stay vectors only). Score and extract results have no
 * vectors and are not written.
 */

export interface IndexedPart {
  rows: number;
  /** Items of the part that had no dense vector (sparse-only or multivector models). */
  skipped: number;
}

function sourceOf(jobId: string, part: number): string {
  return `shoal-job://${jobId}/part-${part}`;
}

/** What a row is made of: an encoded item (extract items have no `dense` and give no row). */
export interface VectorItem {
  index: number;
  id?: ItemId | undefined;
  dense?: number[] | undefined;
  /** The input text (results of jobs with an index target carry it). */
  text?: string | undefined;
}

export function rowId(jobId: string, item: VectorItem): string {
  return item.id === undefined ? `${jobId}:${item.index}` : String(item.id);
}

/** The rows of one encode part (exported for unit tests). */
export function partRows(message: JobPartResult, result: { items: readonly VectorItem[] }, now = new Date()): { rows: ChunkRow[]; state: DocumentState; skipped: number } {
  const at = now.toISOString();
  const source = sourceOf(message.job_id, message.part);
  const rows: ChunkRow[] = [];
  let skipped = 0;
  for (const item of result.items) {
    if (item.dense === undefined || item.dense.length === 0) {
      skipped++;
      continue;
    }
    const text = item.text ?? '';
    rows.push({
      id: rowId(message.job_id, item),
      document_id: message.job_id,
      source,
      page: message.part,
      chunk: item.index,
      text,
      start: 0,
      end: text.length,
      heading: null,
      settings: message.model,
      vector: Float32Array.from(item.dense),
      entities: null,
      labels: null,
      ingested_at: at,
      sparse: null,
    });
  }
  const state: DocumentState = { source, document_id: message.job_id, settings: message.model, chunks: rows.length, pages: 1, ingested_at: at };
  return { rows, state, skipped };
}

export class ResultIndexWriter {
  readonly #sink: Store;
  /** Dimension and output type the table was prepared for in this process (prepare once per shape, then only a check here). */
  #prepared: string | null = null;

  constructor(sink: Store) {
    this.#sink = sink;
  }

  /**
   * Writes one part's rows; resolves only once the store committed them (the caller acks after).
   * Throws the store's error (UNAVAILABLE after the sink's own retries) for the caller to nak.
   */
  async write(message: JobPartResult, result: z.infer<typeof PrimitiveResult>): Promise<IndexedPart | null> {
    if (message.primitive !== 'encode' || !('items' in result)) return null;
    const { rows, state, skipped } = partRows(message, result);
    const first = rows[0];
    // The vectors hold the values of the output type the job asked for: the table stores that type.
    const vectorType = message.dtype ?? 'float32';
    const shape = `${first?.vector.length}:${vectorType}`;
    if (first !== undefined && this.#prepared !== shape) {
      const dimensions: Record<string, string> = message.dimensions === undefined ? {} : { dimensions: String(message.dimensions) };
      await this.#sink.prepare({
        dimension: first.vector.length,
        distance: 'cosine',
        vectorType,
        optionalColumns: [],
        metadata: { model: message.model, written_by: 'shoal sink', ...dimensions },
      });
      this.#prepared = shape;
    }
    await this.#sink.commit(rows, [state]);
    return { rows: rows.length, skipped };
  }

  #closed: Promise<void> | null = null;

  close(): Promise<void> {
    this.#closed ??= this.#sink.close();
    return this.#closed;
  }
}
