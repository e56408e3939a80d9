import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { LanceDbStore } from '../../adapters/stores/lancedb/store.js';
import { parseDefinition } from '../../pipelines/documents/definition.js';
import { NatsIngest } from '../../pipelines/documents/nats-ingest.js';
import { DocumentParser } from '../../pipelines/documents/parse.js';
import { IngestRunner } from '../../pipelines/documents/runner.js';
import { fileSources } from '../../pipelines/documents/sources.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { natsServerAvailable, NATS_SERVER_MISSING, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';
import { CONFORMANCE_DIR } from '../helpers/shared.js';
import { readTableRows } from '../helpers/ingest-nats.js';

/**
 * A pipeline with dense, sparse (SPLADE) and multi-vector (ColBERT) encoders ingested in process
 * and through NATS (a worker serving the three conformance models and the parse role): the same
 * row ids, texts, dense vectors within 1e-5, sparse vectors (same term ids, weights within 1e-5)
 * and token vectors (same count, values within 1e-5) in both indexes.
 */

const DEFINITION = parseDefinition(
  { name: 'hybrid', stages: { parse: { ocr: 'never' }, chunk: { size: 48, overlap: 0 }, encode: { model: 'bert-mean-embed', sparse: { model: 'bert-splade' }, multivector: { model: 'bert-colbert' } } } },
  'test',
);
const TEXTS = [
  'The pilot boat leaves the harbour at dawn and returns before the tide turns. The crew checks the radio twice.',
  'Whisk the eggs with sugar, fold in the flour and bake the sponge for forty minutes.',
  'Quarterly revenue grew by eleven percent while operating costs stayed flat. The board approved a dividend.',
  'Prune the roses in late winter and mulch the beds before the first frost.',
];

const List = z.custom<Iterable<number>>((value) => typeof value === 'object' && value !== null && Symbol.iterator in value).transform((value) => Array.from(value));
const Tokens = z.custom<Iterable<Iterable<number>>>((value) => typeof value === 'object' && value !== null && Symbol.iterator in value).transform((value) => Array.from(value, (token) => Array.from(token)));
const Row = z.object({ id: z.string(), source: z.string(), text: z.string(), page: z.number(), chunk: z.number(), vector: List, sparse_indices: List, sparse_values: List, multivector: Tokens });
type Row = z.infer<typeof Row>;

async function readRows(index: string): Promise<Row[]> {
  return readTableRows(index, Row);
}

function worstDifference(a: readonly number[], b: readonly number[]): number {
  expect(b).toHaveLength(a.length);
  return a.reduce((worst, value, i) => Math.max(worst, Math.abs(value - (b[i] ?? Number.NaN))), 0);
}

describe.skipIf(!natsServerAvailable())('ingest with sparse and multi-vector encoders over NATS', () => {
  let server: NatsServerHandle;
  let worker: ShoalWorker;
  let nc: NatsConnection;
  let root: string;
  const prefix = uniquePrefix('sparsenats');

  beforeAll(async () => {
    server = await startNatsServer();
    root = await mkdtemp(join(tmpdir(), 'shoal-sparse-nats-'));
    await Promise.all(TEXTS.map((text, i) => writeFile(join(root, `doc${i}.txt`), text)));
    worker = await startTestWorker(server.url, prefix, {
      engine: { modelDirs: [CONFORMANCE_DIR], threads: 1, memoryBudget: '2GiB' },
      models: ['bert-mean-embed', 'bert-splade', 'bert-colbert'],
      parse: true,
    });
    nc = await testConnection(server.url);
  }, 60_000);

  afterAll(async () => {
    await worker?.close();
    await nc?.close();
    await server?.stop();
    await rm(root, { recursive: true, force: true });
  }, 30_000);

  it(natsServerAvailable() ? 'gives the rows of an in-process run, sparse and token vectors included' : NATS_SERVER_MISSING, async () => {
    const localIndex = join(root, 'local');
    const natsIndex = join(root, 'nats');
    const sources = async (): ReturnType<typeof fileSources> => fileSources([root], { include: ['*.txt'] });

    const engine = new InferenceEngine({ sources: { modelDirs: [CONFORMANCE_DIR], allowDownload: false }, runtime: { intraOpThreads: 1 } });
    const parser = new DocumentParser(engine, { ocr: 'never' });
    const localSink = new LanceDbStore({ dir: localIndex });
    try {
      const summary = await new IngestRunner({ definition: DEFINITION, engine, sink: localSink, reader: parser }).run(await sources());
      expect(summary.documents).toEqual({ total: 4, ok: 4, failed: 0, unchanged: 0 });
    } finally {
      await parser.close();
      await localSink.close();
      await engine.close();
    }

    const ingest = await NatsIngest.open(nc, { prefix });
    const natsSink = new LanceDbStore({ dir: natsIndex });
    try {
      const summary = await ingest.run({ definition: DEFINITION, sink: natsSink, index: natsIndex }, await sources());
      expect(summary.documents).toEqual({ total: 4, ok: 4, failed: 0, unchanged: 0 });
    } finally {
      await natsSink.close();
      await ingest.close();
    }

    const local = await readRows(localIndex);
    const remote = await readRows(natsIndex);
    expect(local.length).toBeGreaterThanOrEqual(TEXTS.length);
    const strip = ({ vector: _v, sparse_values: _s, multivector: _m, ...rest }: Row): Omit<Row, 'vector' | 'sparse_values' | 'multivector'> => rest;
    // Same ids, texts, pages and sparse term ids; the numbers within 1e-5 (batches differ between the two runs).
    expect(remote.map(strip)).toEqual(local.map(strip));
    let worst = 0;
    local.forEach((row, i) => {
      const other = remote[i];
      expect(row.sparse_indices.length).toBeGreaterThan(0);
      worst = Math.max(worst, worstDifference(row.vector, other?.vector ?? []), worstDifference(row.sparse_values, other?.sparse_values ?? []));
      expect(other?.multivector).toHaveLength(row.multivector.length);
      row.multivector.forEach((token, t) => (worst = Math.max(worst, worstDifference(token, other?.multivector[t] ?? []))));
    });
    expect(worst).toBeLessThan(1e-5);
  }, 180_000);
});
