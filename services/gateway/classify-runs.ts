import { createHash, randomUUID } from 'node:crypto';
import { createReadStream, existsSync } from 'node:fs';
import { open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { ClassifyRunStatus, ParsedClassifyRequest } from '../../adapters/protocol/classify.js';
import type { Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError, toShoalError } from '../../adapters/protocol/errors.js';
import type { Logger } from '../../adapters/observability/logger.js';
import { requestClassifierOptions, requestTaxonomy, TaxonomyClassifier } from '../../pipelines/classify/index.js';
import { makeDirectory } from '../../adapters/support/directories.js';
import { RetryingEngine } from '../../adapters/nats/rpc/retrying-engine.js';
import type { Taxonomy } from '../../adapters/taxonomy/index.js';
import { publicText } from './redact.js';

/**
 * Classification jobs of POST /v1/classify (more items than the sync limit, or `mode: "job"`):
 * the gateway process classifies them in the background, a few runs at a time, the rest queued,
 * and beyond the queue a submission is refused with 429 (OVERLOADED, Retry-After). Each run opens
 * its own classifier on the engine without admission control (its calls are `bulk` priority, so
 * the scheduler serves synchronous calls first) and writes one JSON line per product to a file
 * under the results folder, so memory holds one chunk, not the catalog. Status and results are
 * read through GET /v1/jobs/:id[/results]. Runs live in this process: a gateway stopped mid-run
 * fails its runs (CANCELLED) and removes its results folder; status does not survive a restart.
 */

export interface ClassifyRunsOptions {
  /** The engine runs classify through (no admission control: runs queue here instead). */
  engine: Engine;
  /** Results go to `<resultsDir>/<instance>/<job_id>.jsonl`. @default `<os tmpdir>/shoal-classify-jobs` */
  resultsDir?: string | null;
  /** Category cache folder (`classify/` beneath it), so a taxonomy is embedded once across runs. @default none */
  cacheDir?: string | null;
  /** Runs classified at once. @default 1 */
  maxRunning?: number;
  /** Runs waiting behind them before submissions are answered 429. @default 8 */
  maxQueued?: number;
  /** Finished runs whose status and results are kept (the oldest are forgotten, their files removed). @default 256 */
  keptRuns?: number;
  /** Products per engine round. @default 256 */
  chunkItems?: number;
  /** How long a run waits out a busy or restarting worker (retryable failures) before it fails. @default 120000 */
  retryForMs?: number;
  logger?: Logger;
}

interface Run {
  status: ClassifyRunStatus;
  /** sha256 of the request: a resubmitted id is the same run only with the same content. */
  readonly hash: string;
  /** Dropped once the run ends, so a finished run holds no products. */
  request: ParsedClassifyRequest | null;
  /** The request's taxonomy, parsed at submit so a bad one is refused then (422), not after the 202. */
  taxonomy: Taxonomy | null;
  readonly file: string;
}

const FINISHED: ReadonlySet<ClassifyRunStatus['state']> = new Set(['completed', 'failed']);
const MAX_RETRY_AFTER_S = 60;
const DEFAULT_RETRY_FOR_MS = 120_000;

function contentHash(request: ParsedClassifyRequest): string {
  return createHash('sha256').update(JSON.stringify(request)).digest('hex');
}

export class ClassifyRuns {
  readonly #engine: Engine;
  readonly #folder: string;
  readonly #cacheDir: string | null;
  readonly #maxRunning: number;
  readonly #maxQueued: number;
  readonly #keptRuns: number;
  readonly #chunkItems: number;
  readonly #logger: Logger | undefined;
  readonly #runs = new Map<string, Run>();
  readonly #queue: Run[] = [];
  /** Finished run ids, oldest first (eviction order). */
  readonly #finished: string[] = [];
  readonly #running = new Set<Promise<void>>();
  readonly #stop = new AbortController();
  #closing: Promise<void> | null = null;
  /** Products classified per second by the last run, for Retry-After. */
  #itemsPerSecond: number | null = null;

  constructor(options: ClassifyRunsOptions) {
    // A job is bulk work: a worker busy with interactive calls (OVERLOADED) or restarting is waited for, not a failure.
    this.#engine = new RetryingEngine(options.engine, options.retryForMs ?? DEFAULT_RETRY_FOR_MS);
    // One folder per gateway process: two gateways sharing a cache folder never touch each other's files.
    this.#folder = join(options.resultsDir ?? join(tmpdir(), 'shoal-classify-jobs'), `gateway-${randomUUID().slice(0, 8)}`);
    this.#cacheDir = options.cacheDir ?? null;
    this.#maxRunning = Math.max(1, options.maxRunning ?? 1);
    this.#maxQueued = Math.max(0, options.maxQueued ?? 8);
    this.#keptRuns = Math.max(1, options.keptRuns ?? 256);
    this.#chunkItems = Math.max(1, options.chunkItems ?? 256);
    this.#logger = options.logger;
  }

  /** Where this process writes results (docs/classify.md). */
  get folder(): string {
    return this.#folder;
  }

  status(jobId: string): ClassifyRunStatus | null {
    const run = this.#runs.get(jobId);
    return run === undefined ? null : { ...run.status };
  }

  /**
   * Queues a run (or answers the existing one for the same id and content). Throws JOB_CONFLICT
   * for an id used with other content, OVERLOADED when the queue is full, UNAVAILABLE once closing.
   */
  submit(request: ParsedClassifyRequest, jobId: string = randomUUID()): ClassifyRunStatus {
    const hash = contentHash(request);
    const existing = this.#runs.get(jobId);
    if (existing !== undefined) {
      if (existing.hash !== hash) {
        throw new ShoalError(ErrorCode.JOB_CONFLICT, `job ${jobId} exists with a different request; choose another job_id or resubmit the same request`, { details: { job_id: jobId } });
      }
      return { ...existing.status };
    }
    if (this.#closing !== null) throw new ShoalError(ErrorCode.UNAVAILABLE, 'the gateway is stopping and takes no classification jobs');
    const taxonomy = requestTaxonomy(request);
    if (this.#queue.length >= this.#maxQueued && this.#running.size >= this.#maxRunning) {
      const retryAfterSeconds = this.#retryAfter();
      throw new ShoalError(ErrorCode.OVERLOADED, `${this.#running.size} classification jobs are running and ${this.#queue.length} are queued on this gateway (the most it holds); retry in ${retryAfterSeconds} s`, {
        details: { running: this.#running.size, queued: this.#queue.length, retryAfterSeconds },
      });
    }
    const now = new Date().toISOString();
    const run: Run = {
      status: { job_id: jobId, kind: 'classify', state: 'queued', model: request.model, items: request.items.length, items_done: 0, categories: null, error: null, created_at: now, updated_at: now },
      hash,
      request,
      taxonomy,
      file: join(this.#folder, `${jobId}.jsonl`),
    };
    this.#runs.set(jobId, run);
    this.#queue.push(run);
    this.#pump();
    return { ...run.status };
  }

  /** A finished run's results file as a stream (JSON Lines, input order). */
  results(jobId: string): { status: ClassifyRunStatus; stream: Readable } | null {
    const run = this.#runs.get(jobId);
    if (run === undefined) return null;
    if (!FINISHED.has(run.status.state)) {
      throw new ShoalError(ErrorCode.UNAVAILABLE, `job ${jobId} is ${run.status.state} (${run.status.items_done} of ${run.status.items} products classified): read its results once GET /v1/jobs/${jobId} says completed or failed`, {
        details: { job_id: jobId, state: run.status.state },
      });
    }
    // A run that failed before its file was created (the folder could not be made) has no lines.
    return { status: { ...run.status }, stream: existsSync(run.file) ? createReadStream(run.file) : Readable.from([]) };
  }

  /** The time the runs ahead take at the last measured speed (1 to 60 s). */
  #retryAfter(): number {
    const ahead = [...this.#runs.values()].filter((run) => !FINISHED.has(run.status.state)).reduce((sum, run) => sum + run.status.items - run.status.items_done, 0);
    const seconds = this.#itemsPerSecond === null ? 10 : ahead / this.#itemsPerSecond;
    return Math.min(MAX_RETRY_AFTER_S, Math.max(1, Math.ceil(seconds)));
  }

  #pump(): void {
    while (this.#running.size < this.#maxRunning && this.#closing === null) {
      const run = this.#queue.shift();
      if (run === undefined) return;
      const running: Promise<void> = this.#execute(run).finally(() => {
        this.#running.delete(running);
        this.#pump();
      });
      this.#running.add(running);
    }
  }

  #update(run: Run, change: Partial<ClassifyRunStatus>): void {
    run.status = { ...run.status, ...change, updated_at: new Date().toISOString() };
  }

  async #execute(run: Run): Promise<void> {
    const { request, taxonomy } = run;
    if (request === null || taxonomy === null) return;
    const signal = this.#stop.signal;
    const started = Date.now();
    this.#update(run, { state: 'running' });
    try {
      await makeDirectory(this.#folder);
      const file = await open(run.file, 'w');
      try {
        // Closed while the file was being opened: an engine call made now would start after its abort.
        if (signal.aborted) throw new ShoalError(ErrorCode.CANCELLED, 'the gateway stopped before the job started');
        const classifier = await TaxonomyClassifier.open(this.#engine, taxonomy, requestClassifierOptions(request, this.#cacheDir), { signal });
        try {
          this.#update(run, { categories: classifier.taxonomy.categories.length });
          for (let start = 0; start < request.items.length; start += this.#chunkItems) {
            if (signal.aborted) throw new ShoalError(ErrorCode.CANCELLED, 'the gateway stopped before the job finished');
            // Ids default to the position in the whole job, as in a synchronous answer.
            const chunk = request.items.slice(start, start + this.#chunkItems).map((item, at) => ({ ...item, id: item.id ?? start + at }));
            const lines = await classifier.classify(chunk, { signal });
            await file.write(lines.map((line) => `${JSON.stringify(line)}\n`).join(''));
            this.#update(run, { items_done: run.status.items_done + chunk.length });
          }
        } finally {
          await classifier.close();
        }
      } finally {
        await file.close();
      }
      this.#itemsPerSecond = request.items.length / Math.max(0.001, (Date.now() - started) / 1000);
      this.#update(run, { state: 'completed' });
      this.#logger?.info({ job: run.status.job_id, items: run.status.items, seconds: (Date.now() - started) / 1000 }, 'classification job finished');
    } catch (error) {
      const shoal = signal.aborted ? new ShoalError(ErrorCode.CANCELLED, 'the gateway stopped before the job finished') : toShoalError(error);
      this.#update(run, { state: 'failed', error: { code: shoal.code, message: publicText(shoal.message).slice(0, 2_048) } });
      this.#logger?.warn({ job: run.status.job_id, code: shoal.code, reason: shoal.message.slice(0, 300) }, 'classification job failed');
    } finally {
      run.request = null;
      run.taxonomy = null;
      await this.#finish(run);
    }
  }

  async #finish(run: Run): Promise<void> {
    this.#finished.push(run.status.job_id);
    while (this.#finished.length > this.#keptRuns) {
      const oldest = this.#finished.shift();
      const evicted = oldest === undefined ? undefined : this.#runs.get(oldest);
      if (oldest === undefined || evicted === undefined) continue;
      this.#runs.delete(oldest);
      await rm(evicted.file, { force: true });
    }
  }

  /** Stops every run (running ones end failed with CANCELLED, queued ones never start), then removes this process's results. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#stop.abort();
      for (const run of this.#queue.splice(0)) {
        this.#update(run, { state: 'failed', error: { code: ErrorCode.CANCELLED, message: 'the gateway stopped before the job started' } });
        run.request = null;
        run.taxonomy = null;
      }
      await Promise.all([...this.#running]);
      await rm(this.#folder, { recursive: true, force: true });
    })();
    return this.#closing;
  }
}
