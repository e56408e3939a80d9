import type { Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError, toShoalError } from '../../adapters/protocol/errors.js';
import { MULTIVECTOR_DIMENSION_KEY } from '../../adapters/stores/shared/multivector.js';
import type { ChunkRow, DocumentState, Store } from '../../adapters/stores/store.js';
import { chunkPages, encoderTokenLimit, engineTokenCounter, type ChunkSettings, type TextChunk, type TokenCounter } from './chunk.js';
import type { PipelineDefinition } from './definition.js';
import type { DocumentMetadata } from '../../adapters/protocol/metadata.js';
import type { DocumentSource, ParseOutcome } from './document.js';
import { documentMetadata } from './document-metadata.js';
import { chunkId, contentHash, settingsHash } from './identity.js';
import { interruptedWith } from './interrupted.js';
import type { FailedDocument, IngestSummary } from './summary.js';
import type { PendingSource } from './sources.js';
import { LabelClassifier } from './stages/classify.js';
import { encodeDense } from './stages/encode.js';
import { encodeMultivector, MULTIVECTOR_MODEL_KEY } from './stages/encode-multivector.js';
import { encodeSparse, SPARSE_MODEL_KEY } from './stages/encode-sparse.js';
import { extractEntities } from './stages/extract.js';

/**
 * Runs a document pipeline in process: sources → (skip unchanged) → parse → chunk → encode →
 * extract? → classify? → write. Documents flow in waves of many chunks, so each engine request
 * spans documents; the next wave is parsed and chunked while the current one is encoded. A
 * document's rows are committed together with its state row only once all its stages succeeded,
 * which makes an interrupted run resumable: committed documents are skipped, the rest redone, and
 * rewritten rows keep their deterministic ids (upserts, never duplicates).
 */

/** What the runner needs from a parser (the DocumentParser of parse.ts). */
export interface DocumentReader {
  parse(source: DocumentSource): Promise<ParseOutcome>;
}

export type { FailedDocument, IngestSummary } from './summary.js';

export interface IngestProgress {
  total: number;
  /** Documents finished: committed, failed or unchanged. */
  done: number;
  /** Documents read: parsed and chunked (not yet committed), failed or unchanged. */
  read: number;
  pages: number;
  ocrPages: number;
  chunks: number;
}

/**
 * Where a run spends its time, for benchmarks (bench/ingest.ts): `parse` and `chunk` are per
 * document (documents are parsed two at a time, so their sum can exceed the wall time), `encode`
 * (plus extract/classify when configured) and `write` (a commit) per wave or flush, and `wait` is
 * the time the main loop waited for the next wave to be parsed and chunked (intake not hidden
 * behind inference).
 */
export type IngestStage = 'parse' | 'chunk' | 'encode' | 'write' | 'wait';

export interface IngestRunOptions {
  definition: PipelineDefinition;
  engine: Engine;
  sink: Store;
  reader: DocumentReader;
  /** Re-ingest documents that are already in the index unchanged. */
  force?: boolean;
  signal?: AbortSignal;
  onProgress?: (progress: IngestProgress) => void;
  /** Called with the milliseconds of each stage step (see IngestStage); timing only, no effect on the run. */
  onStage?: (stage: IngestStage, milliseconds: number) => void;
  /** Metadata stored with a table the run creates (the CLI records the encode model and pipeline). */
  tableMetadata?: Record<string, string>;
  /** Called with the sources of a wave once its model stages ran (the NATS coordinator records them `encoded`). */
  onEncoded?: (sources: readonly string[]) => Promise<void> | void;
  /** Called with the states of documents once their rows are committed. */
  onCommitted?: (states: readonly DocumentState[]) => Promise<void> | void;
  /** Called with the states of documents just before their rows are committed (a document worker records its intent). */
  beforeCommit?: (states: readonly DocumentState[]) => Promise<void> | void;
  /** Called once per document as it ends: committed (after its commit), unchanged or failed. */
  onOutcome?: (outcome: DocumentOutcome) => void;
  /**
   * Called with true as the run's closing `optimize()` starts and false when it ends: the index
   * build it may start (a table crossing its store's index threshold; at a million rows one statement) can take many minutes without any other
   * sign of progress, which a caller watching for stalls (document-jobs.ts) does not count.
   */
  onIndexing?: (indexing: boolean) => void;
}

/** How one document of a run ended (IngestRunOptions.onOutcome). */
export interface DocumentOutcome {
  source: string;
  state: 'committed' | 'unchanged' | 'failed';
  /** sha256 of its bytes; null when they could not be read. */
  documentId: string | null;
  chunks: number;
  pages: number;
  /** Pages read by OCR (committed documents). */
  ocrPages?: number;
  code?: string;
  reason?: string;
}

/** Chunks per wave at most: one wave's texts go to the engine together (fewer when write.batchRows is smaller). */
const MAX_WAVE_CHUNKS = 256;
/** Finished documents are committed at least this often, so a long run keeps its progress. */
const MAX_COMMIT_INTERVAL_MS = 10_000;
/** Documents parsed at once (the parser spreads them over its threads). */
const PARSE_CONCURRENCY = 2;

interface ReadyDocument {
  uri: string;
  documentId: string;
  pages: number;
  ocrPages: number;
  chunks: TextChunk[];
  /** Stored with each of its chunks (document-metadata.ts). */
  metadata: DocumentMetadata | undefined;
}

/** Failures of the content itself: the file changed into something with no rows to keep. */
const CONTENT_FAILURES: ReadonlySet<string> = new Set([ErrorCode.DOCUMENT_EMPTY, ErrorCode.DOCUMENT_CORRUPT, ErrorCode.DOCUMENT_ENCRYPTED, ErrorCode.UNSUPPORTED_DOCUMENT, ErrorCode.DOCUMENT_TOO_LARGE]);

/** Failures of a request built from the document's own text: no retry or other document changes them. */
const INPUT_FAILURES: ReadonlySet<string> = new Set([ErrorCode.INVALID_INPUT, ErrorCode.INPUT_TOO_LARGE, ErrorCode.DOCUMENT_TOO_LARGE]);

type Prepared = { kind: 'ready'; document: ReadyDocument } | { kind: 'unchanged'; state: DocumentState } | { kind: 'failed'; failure: FailedDocument; documentId: string | null };

function multivectorMetadata(multivector: PipelineDefinition['stages']['encode']['multivector'], tokenDimension: number | undefined): Record<string, string> {
  if (multivector === undefined) return {};
  return { [MULTIVECTOR_MODEL_KEY]: multivector.model, ...(tokenDimension === undefined ? {} : { [MULTIVECTOR_DIMENSION_KEY]: String(tokenDimension) }) };
}

function sparseMetadata(sparse: PipelineDefinition['stages']['encode']['sparse']): Record<string, string> {
  return sparse === undefined ? {} : { [SPARSE_MODEL_KEY]: sparse.model };
}

export class IngestRunner {
  readonly #options: IngestRunOptions;
  readonly #settings: string;
  readonly #count: TokenCounter;
  readonly #classifier: LabelClassifier | null;
  #states = new Map<string, DocumentState>();
  /** OCR pages of the documents read, for onOutcome (a state row does not keep them). */
  readonly #ocrPages = new Map<string, number>();
  /** Sources whose new content failed for good: their earlier rows are removed at the end of the run. */
  #stale: string[] = [];
  #cursor = 0;
  #sources: readonly PendingSource[] = [];
  #prepared = false;
  #chunking: Promise<ChunkSettings> | null = null;
  readonly #progress: IngestProgress = { total: 0, done: 0, read: 0, pages: 0, ocrPages: 0, chunks: 0 };
  readonly #summary: IngestSummary = { documents: { total: 0, ok: 0, failed: 0, unchanged: 0 }, failed: [], pages: 0, ocrPages: 0, chunks: 0, seconds: 0 };

  constructor(options: IngestRunOptions) {
    this.#options = options;
    this.#settings = settingsHash(options.definition);
    const { encode, classify } = options.definition.stages;
    this.#count = engineTokenCounter(options.engine, encode.model, options.signal);
    // Typed or truncated chunk vectors do not compare with the label vectors: the classifier then encodes the chunks itself.
    const comparable = (encode.dtype ?? 'float32') === 'float32' && encode.dimensions === undefined;
    this.#classifier = classify === undefined ? null : new LabelClassifier(options.engine, classify, encode.model, comparable);
  }

  get settingsHash(): string {
    return this.#settings;
  }

  /**
   * Runs the pipeline over `sources`. An interrupt rejects with CANCELLED carrying the summary of
   * what finished before it (interrupted.ts), so the caller can still report it.
   */
  async run(sources: readonly PendingSource[]): Promise<IngestSummary> {
    const started = performance.now();
    try {
      await this.#run(sources);
    } catch (error) {
      const shoal = toShoalError(error);
      if (shoal.code !== ErrorCode.CANCELLED) throw error;
      this.#summary.seconds = (performance.now() - started) / 1000;
      throw interruptedWith(shoal, this.#summary);
    }
    this.#summary.seconds = (performance.now() - started) / 1000;
    return this.#summary;
  }

  async #run(sources: readonly PendingSource[]): Promise<void> {
    this.#sources = sources;
    this.#progress.total = sources.length;
    this.#summary.documents.total = sources.length;
    await this.#checkExistingModel();
    await this.#checkExtractModel();
    this.#states = await this.#options.sink.states(sources.map((source) => source.uri));
    // Pages are counted once their document is committed, so an interrupted run's summary counts only what it kept.
    let buffered: { rows: ChunkRow[]; states: DocumentState[]; ocrPages: number } = { rows: [], states: [], ocrPages: 0 };
    let lastCommit = performance.now();
    const flush = async (): Promise<void> => {
      lastCommit = performance.now();
      if (buffered.states.length === 0) return;
      const { rows, states, ocrPages } = buffered;
      buffered = { rows: [], states: [], ocrPages: 0 };
      const committing = performance.now();
      await this.#options.beforeCommit?.(states);
      await this.#options.sink.commit(rows, states);
      this.#stage('write', committing);
      await this.#options.onCommitted?.(states);
      for (const state of states) this.#options.onOutcome?.({ source: state.source, state: 'committed', documentId: state.document_id, chunks: state.chunks, pages: state.pages, ocrPages: this.#ocrPages.get(state.source) ?? 0 });
      this.#summary.documents.ok += states.length;
      this.#summary.chunks += rows.length;
      this.#summary.pages += states.reduce((sum, state) => sum + state.pages, 0);
      this.#summary.ocrPages += ocrPages;
      this.#progress.done += states.length;
      this.#report();
    };
    try {
      let next = this.#nextWave();
      let waiting = performance.now();
      for (let wave = await next; wave.length > 0; wave = await next) {
        this.#stage('wait', waiting);
        next = this.#nextWave();
        // Handled here so an interrupt while this wave is written is not an unhandled rejection;
        // the loop's next `await next` still throws it.
        next.catch(() => undefined);
        const written = await this.#writeWave(wave);
        // One at a time: a spread of a long document's rows (100,000+ chunks) overflows the call stack.
        for (const row of written.rows) buffered.rows.push(row);
        for (const state of written.states) buffered.states.push(state);
        buffered.ocrPages += wave.reduce((sum, document) => sum + document.ocrPages, 0);
        const due = performance.now() - lastCommit >= MAX_COMMIT_INTERVAL_MS;
        if (due || buffered.rows.length >= this.#options.definition.stages.write.batchRows) await flush();
        waiting = performance.now();
      }
      this.#stage('wait', waiting);
      await flush();
      // After every commit, so a delete never races a write of the same table.
      if (this.#stale.length > 0) await this.#options.sink.remove(this.#stale);
    } catch (error) {
      // Whatever finished before the failure or interrupt is kept (an interrupt lets the wave being
      // encoded finish: only parsing stops), so a re-run starts after it.
      await flush().catch(() => undefined);
      throw error;
    }
    const optimizing = performance.now();
    this.#options.onIndexing?.(true);
    try {
      await this.#options.sink.optimize();
    } finally {
      this.#options.onIndexing?.(false);
    }
    this.#stage('write', optimizing);
  }

  /**
   * One tiny extract call before anything is parsed: a model the extract stage cannot run
   * (missing, or a zero-shot model given no labels) fails the run now, not after the first wave
   * of documents is parsed (minutes with OCR).
   */
  async #checkExtractModel(): Promise<void> {
    const extract = this.#options.definition.stages.extract;
    if (extract === undefined) return;
    await extractEntities(this.#options.engine, ['Shoal checks the extract model before the run.'], extract, this.#options.signal === undefined ? {} : { signal: this.#options.signal });
  }

  /**
   * Vectors of two models in one table are not comparable even when their dimensions agree, and
   * search encodes queries with the model the table records: another encode model is refused.
   */
  async #checkExistingModel(): Promise<void> {
    const existing = await this.#options.sink.describe();
    const model = this.#options.definition.stages.encode.model;
    const recorded = existing?.metadata.model;
    if (recorded !== undefined && recorded !== model) {
      throw new ShoalError(ErrorCode.CONFIG_INVALID, `the index table was built with model ${recorded}, not ${model}: use that model, or another --table or --index`);
    }
    // Likewise the sparse model: search fuses the sparse ranking only when every row has a vector of the recorded model.
    const sparse = this.#options.definition.stages.encode.sparse?.model;
    const recordedSparse = existing?.metadata[SPARSE_MODEL_KEY];
    if (recorded !== undefined && recordedSparse !== sparse) {
      const built = recordedSparse === undefined ? 'without sparse vectors' : `with sparse model ${recordedSparse}`;
      const asked = sparse === undefined ? 'a pipeline without encode.sparse' : `sparse model ${sparse}`;
      throw new ShoalError(ErrorCode.CONFIG_INVALID, `the index table was built ${built}, not ${asked}: use the same encode stage, or another --table or --index`);
    }
    const multivector = this.#options.definition.stages.encode.multivector?.model;
    const recordedMultivector = existing?.metadata[MULTIVECTOR_MODEL_KEY];
    if (recorded !== undefined && recordedMultivector !== multivector) {
      const built = recordedMultivector === undefined ? 'without multi-vectors' : `with multi-vector model ${recordedMultivector}`;
      const asked = multivector === undefined ? 'a pipeline without encode.multivector' : `multi-vector model ${multivector}`;
      throw new ShoalError(ErrorCode.CONFIG_INVALID, `the index table was built ${built}, not ${asked}: use the same encode stage, or another --table or --index`);
    }
  }

  #stage(stage: IngestStage, since: number): void {
    this.#options.onStage?.(stage, performance.now() - since);
  }

  #report(): void {
    this.#options.onProgress?.({ ...this.#progress });
  }

  #throwIfAborted(): void {
    if (this.#options.signal?.aborted === true) throw new ShoalError(ErrorCode.CANCELLED, 'interrupted');
  }

  /** Parses and chunks documents until a wave holds enough chunks or the sources run out. */
  async #nextWave(): Promise<ReadyDocument[]> {
    const wave: ReadyDocument[] = [];
    let chunks = 0;
    const waveChunks = Math.min(MAX_WAVE_CHUNKS, this.#options.definition.stages.write.batchRows);
    while (chunks < waveChunks && this.#cursor < this.#sources.length) {
      this.#throwIfAborted();
      const group = this.#sources.slice(this.#cursor, this.#cursor + PARSE_CONCURRENCY);
      this.#cursor += group.length;
      const outcomes = await Promise.all(group.map((source) => this.#prepare(source)));
      for (const outcome of outcomes) {
        this.#progress.read += 1;
        if (outcome.kind === 'unchanged') {
          this.#summary.documents.unchanged += 1;
          this.#progress.done += 1;
          const { state } = outcome;
          this.#options.onOutcome?.({ source: state.source, state: 'unchanged', documentId: state.document_id, chunks: state.chunks, pages: state.pages });
        } else if (outcome.kind === 'failed') {
          this.#summary.documents.failed += 1;
          this.#summary.failed.push(outcome.failure);
          this.#progress.done += 1;
          const { failure } = outcome;
          this.#options.onOutcome?.({ source: failure.source, state: 'failed', documentId: outcome.documentId, chunks: 0, pages: 0, code: failure.code, reason: failure.reason });
        } else {
          wave.push(outcome.document);
          chunks += outcome.document.chunks.length;
        }
      }
      this.#report();
    }
    return wave;
  }

  /**
   * A document whose new content fails for good (emptied, damaged, encrypted, over the limit): its
   * rows from the earlier content are stale, and are removed once the run's writes are done.
   */
  #failedContent(source: string, code: string, reason: string, documentId: string | null): Prepared {
    if (!this.#states.has(source)) return { kind: 'failed', failure: { source, code, reason }, documentId };
    this.#stale.push(source);
    return { kind: 'failed', failure: { source, code, reason: `${reason}; the rows of its earlier content were removed` }, documentId };
  }

  async #prepare(pending: PendingSource): Promise<Prepared> {
    let loaded: Awaited<ReturnType<PendingSource['load']>>;
    try {
      loaded = await pending.load();
    } catch (error) {
      // Over the size limit is the document's own failure, as when the parser finds it; any other is a read failure.
      const shoal = toShoalError(error);
      if (shoal.code === ErrorCode.DOCUMENT_TOO_LARGE) return this.#failedContent(pending.uri, shoal.code, shoal.message, null);
      return { kind: 'failed', failure: { source: pending.uri, code: 'READ_FAILED', reason: shoal.message }, documentId: null };
    }
    const documentId = contentHash(loaded.bytes);
    const state = this.#states.get(pending.uri);
    if (this.#options.force !== true && state?.document_id === documentId && state.settings === this.#settings) return { kind: 'unchanged', state };
    let outcome: ParseOutcome;
    const parsing = performance.now();
    try {
      outcome = await this.#options.reader.parse(loaded.source);
    } catch (error) {
      const shoal = toShoalError(error);
      if (shoal.code === ErrorCode.CANCELLED) throw shoal;
      outcome = { ok: false, source: pending.uri, code: shoal.code, reason: shoal.message };
    }
    // An interrupt is the run's story, not this document's: it must not be recorded as a failure.
    this.#stage('parse', parsing);
    if (!outcome.ok && outcome.code === ErrorCode.CANCELLED) throw new ShoalError(ErrorCode.CANCELLED, 'interrupted');
    if (!outcome.ok) {
      if (CONTENT_FAILURES.has(outcome.code) && state !== undefined && state.document_id !== documentId) return this.#failedContent(pending.uri, outcome.code, outcome.reason, documentId);
      return { kind: 'failed', failure: { source: pending.uri, code: outcome.code, reason: outcome.reason }, documentId };
    }
    const { pages } = outcome.document;
    let metadata: DocumentMetadata | undefined;
    try {
      metadata = documentMetadata(loaded.source, outcome.document);
    } catch (error) {
      const shoal = toShoalError(error);
      return { kind: 'failed', failure: { source: pending.uri, code: shoal.code, reason: shoal.message }, documentId };
    }
    const ocrPages = pages.filter((page) => page.ocr).length;
    const chunking = performance.now();
    let chunks: TextChunk[];
    try {
      chunks = await chunkPages(pages, await this.#chunkSettings(), this.#count);
    } catch (error) {
      // A text the tokenizer refuses fails its document alone; an engine outage still fails the run.
      const shoal = toShoalError(error);
      if (!INPUT_FAILURES.has(shoal.code)) throw error;
      return { kind: 'failed', failure: { source: pending.uri, code: shoal.code, reason: `cannot be chunked: ${shoal.message}` }, documentId };
    }
    this.#stage('chunk', chunking);
    this.#progress.pages += pages.length;
    this.#progress.ocrPages += ocrPages;
    this.#progress.chunks += chunks.length;
    if (this.#options.onOutcome !== undefined) this.#ocrPages.set(pending.uri, ocrPages);
    return { kind: 'ready', document: { uri: pending.uri, documentId, pages: pages.length, ocrPages, chunks, metadata } };
  }

  /** The pipeline's chunk settings, shrunk to what the encoder reads without truncating. */
  #chunkSettings(): Promise<ChunkSettings> {
    this.#chunking ??= encoderTokenLimit(this.#options.engine, this.#options.definition.stages.encode.model, this.#options.signal).then((limit) => {
      const { size, overlap } = this.#options.definition.stages.chunk;
      if (limit === null || limit >= size) return { size, overlap };
      return { size: limit, overlap: Math.min(overlap, Math.floor(limit / 4)) };
    });
    return this.#chunking;
  }

  /** Runs the model stages over a wave and builds its rows and state rows. */
  async #writeWave(wave: readonly ReadyDocument[]): Promise<{ rows: ChunkRow[]; states: DocumentState[] }> {
    const { encode, extract } = this.#options.definition.stages;
    // No abort signal here: an interrupt stops intake (#nextWave) and lets this wave finish and
    // commit, like a drain; a second Ctrl-C still exits at once (services/cli/main.ts).
    const call = {};
    const encoding = performance.now();
    const texts = wave.flatMap((document) => document.chunks.map((chunk) => chunk.text));
    // Dense, sparse and multi-vector models run side by side (each in its own model thread).
    const [vectors, sparse, multivectors] = await Promise.all([
      texts.length === 0 ? [] : encodeDense(this.#options.engine, texts, { model: encode.model, role: 'document', normalize: encode.normalize, dtype: encode.dtype, dimensions: encode.dimensions }, call),
      encode.sparse === undefined || texts.length === 0 ? null : encodeSparse(this.#options.engine, texts, { model: encode.sparse.model, role: 'document' }, call),
      encode.multivector === undefined || texts.length === 0 ? null : encodeMultivector(this.#options.engine, texts, { model: encode.multivector.model, role: 'document' }, call),
    ]);
    const entities = extract === undefined || texts.length === 0 ? null : await extractEntities(this.#options.engine, texts, extract, call);
    const labels = this.#classifier === null || texts.length === 0 ? null : await this.#classifier.classify(texts, vectors, call);
    this.#stage('encode', encoding);
    await this.#options.onEncoded?.(wave.map((document) => document.uri));
    const first = vectors[0];
    const preparing = performance.now();
    if (first !== undefined) await this.#prepareTable(first.length, multivectors?.[0]?.[0]?.length);
    const ingestedAt = new Date().toISOString();
    const rows: ChunkRow[] = [];
    const states: DocumentState[] = [];
    let at = 0;
    for (const document of wave) {
      for (const chunk of document.chunks) {
        rows.push({
          id: chunkId(document.uri, document.documentId, this.#settings, chunk.index),
          document_id: document.documentId,
          source: document.uri,
          page: chunk.page,
          chunk: chunk.index,
          text: chunk.text,
          start: chunk.start,
          end: chunk.end,
          heading: chunk.heading,
          settings: this.#settings,
          vector: vectors[at] ?? new Float32Array(0),
          entities: entities?.[at] ?? null,
          labels: labels?.[at] ?? null,
          ingested_at: ingestedAt,
          metadata: document.metadata ?? null,
          ...(sparse === null ? {} : { sparse: sparse[at] ?? null }),
          ...(multivectors === null ? {} : { multivector: multivectors[at] ?? null }),
        });
        at += 1;
      }
      states.push({ source: document.uri, document_id: document.documentId, settings: this.#settings, chunks: document.chunks.length, pages: document.pages, ingested_at: ingestedAt });
    }
    this.#stage('write', preparing);
    return { rows, states };
  }

  async #prepareTable(dimension: number, tokenDimension: number | undefined): Promise<void> {
    if (this.#prepared) return;
    const { encode, extract, classify } = this.#options.definition.stages;
    await this.#options.sink.prepare({
      dimension,
      distance: encode.distance,
      vectorType: encode.dtype ?? 'float32',
      optionalColumns: [
        ...(extract === undefined ? [] : ['entities' as const]),
        ...(classify === undefined ? [] : ['labels' as const]),
        ...(encode.sparse === undefined ? [] : ['sparse' as const]),
        ...(encode.multivector === undefined ? [] : ['multivector' as const]),
      ],
      // `dimensions` is how search cuts its query vector the same way.
      metadata: { model: encode.model, pipeline: this.#options.definition.name, ...(encode.dimensions === undefined ? {} : { dimensions: String(encode.dimensions) }), ...sparseMetadata(encode.sparse), ...multivectorMetadata(encode.multivector, tokenDimension), ...this.#options.tableMetadata },
    });
    this.#prepared = true;
  }
}
