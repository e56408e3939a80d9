import type { Engine } from '../../adapters/protocol/engine.js';
import type { Store } from '../../adapters/stores/store.js';
import type { PipelineDefinition } from './definition.js';
import { DocumentParser } from './parse.js';
import { IngestRunner, type IngestProgress, type IngestSummary } from './runner.js';
import type { PendingSource } from './sources.js';

/**
 * One in-process ingest run: a parser with the definition's parse settings, the runner over the
 * sources, and the parser's threads stopped whatever happens. `shoal ingest` (without --nats) and
 * the library's `ingest()` both run this, so they index the same rows.
 */

export interface LocalIngestOptions {
  definition: PipelineDefinition;
  engine: Engine;
  sink: Store;
  sources: readonly PendingSource[];
  /** Redo documents already in the index unchanged. */
  force?: boolean | undefined;
  /** Ends the run: it rejects with CANCELLED carrying the summary of what finished (interrupted.ts). */
  signal?: AbortSignal | undefined;
  onProgress?: ((progress: IngestProgress) => void) | undefined;
  onPage?: ((info: { source: string; page: number; ocr: boolean }) => void) | undefined;
}

export async function ingestInProcess(options: LocalIngestOptions): Promise<IngestSummary> {
  const { definition, engine, sink, signal, onProgress, onPage } = options;
  const parser = new DocumentParser(engine, { ...definition.stages.parse, ...(signal === undefined ? {} : { signal }), ...(onPage === undefined ? {} : { onPage }) });
  try {
    const runner = new IngestRunner({ definition, engine, sink, reader: parser, force: options.force === true, ...(signal === undefined ? {} : { signal }), ...(onProgress === undefined ? {} : { onProgress }) });
    return await runner.run(options.sources);
  } finally {
    await parser.close();
  }
}
