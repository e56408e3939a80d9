import { readFile } from 'node:fs/promises';
import { WIRE_VERSION } from '../../adapters/protocol/jobs.js';
import type { IngestRunStatus } from '../../adapters/protocol/ingest.js';
import type { IngestApi, IngestStart } from '../../services/gateway/context.js';

/**
 * Ingest runs kept in a map, for the HTTP contract of POST /v1/ingest (not the pipeline's): a run
 * is `queued` when started and reads `completed` after `finishAfterReads` status reads (0: at
 * once), so a caller's wait or poll loop sees it move.
 */
export class MemoryIngest implements IngestApi {
  readonly started: IngestStart[] = [];
  /** Uploaded files staged by name (what the object store would hold). */
  readonly staged = new Map<string, Uint8Array>();
  readonly #runs = new Map<string, { status: IngestRunStatus; reads: number }>();
  readonly #finishAfterReads: number;
  #next = 1;

  constructor(options: { finishAfterReads?: number } = {}) {
    this.#finishAfterReads = options.finishAfterReads ?? 0;
  }

  async start(request: IngestStart): Promise<IngestRunStatus> {
    this.started.push(request);
    const jobId = request.job_id ?? `ingest-${this.#next++}`;
    const now = new Date(0).toISOString();
    const status: IngestRunStatus = {
      v: WIRE_VERSION,
      job_id: jobId,
      kind: 'ingest',
      state: 'queued',
      pipeline: request.definition.name,
      index: request.index.name,
      documents: { total: request.records.length, ok: 0, failed: 0, unchanged: 0 },
      pages: 0,
      ocr_pages: 0,
      chunks: 0,
      failed: [],
      created_at: now,
      updated_at: now,
    };
    this.#runs.set(jobId, { status, reads: 0 });
    return status;
  }

  async stage(name: string, path: string): Promise<string> {
    this.staged.set(name, new Uint8Array(await readFile(path)));
    return `obj://shoal_payloads/${name}`;
  }

  async status(jobId: string): Promise<IngestRunStatus | null> {
    const run = this.#runs.get(jobId);
    if (run === undefined) return null;
    run.reads += 1;
    if (run.reads > this.#finishAfterReads && run.status.state === 'queued') {
      const total = run.status.documents.total;
      run.status = { ...run.status, state: 'completed', documents: { ...run.status.documents, ok: total }, pages: total, chunks: total };
    }
    return run.status;
  }
}
