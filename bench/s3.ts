import { parseArgs } from 'node:util';
import { MIB, S3Store } from '../adapters/object-store/index.js';
import { S3JsonStore } from '../adapters/stores/s3/store.js';
import type { ChunkRow, DocumentState } from '../adapters/stores/store.js';
import { startS3Server } from '../test/helpers/s3-server.js';
import { percentile, printTable, writeResult } from './lib/report.js';

/**
 * S3 through Shoal's object-store adapter against a private s3rver on loopback (the only S3
 * server on this machine; a JavaScript server writing files, so these are lower bounds for MinIO
 * or AWS): whole-object write and read speed (one PutObject under the part size, a multipart
 * upload over it), and the S3 sink's commit speed (rows/s, `--docs` documents of `--chunks`
 * rows at 384 dimensions, 100 documents per commit) and brute-force search latency (first search
 * reads every row object; later ones reuse them by ETag).
 *
 *   npx tsx bench/s3.ts [--docs 1000] [--chunks 5] [--queries 20]
 */

const { values } = parseArgs({ options: { docs: { type: 'string', default: '1000' }, chunks: { type: 'string', default: '5' }, queries: { type: 'string', default: '20' } } });
const docs = Number(values.docs);
const perDoc = Number(values.chunks);
const queries = Number(values.queries);
const DIM = 384;

const server = await startS3Server(['bench']);
const store = new S3Store(server.settings({ operationRetryMs: 60_000 }));
try {
  // Warm-up: the SDK is loaded and the connection opened outside the timed writes.
  await store.write({ bucket: 'bench', key: 'warm-up' }, Buffer.from('x'));
  const transfer: { object: string; write_MBps: number; read_MBps: number }[] = [];
  for (const size of [4 * MIB, 64 * MIB]) {
    const body = Buffer.alloc(size, 7);
    let started = performance.now();
    await store.write({ bucket: 'bench', key: `blob-${size}` }, body);
    const writeSeconds = (performance.now() - started) / 1000;
    started = performance.now();
    await store.read({ bucket: 'bench', key: `blob-${size}` }, size);
    const readSeconds = (performance.now() - started) / 1000;
    transfer.push({ object: `${size / MIB} MiB (${size > store.settings.partBytes ? 'multipart' : 'PutObject'})`, write_MBps: size / MIB / writeSeconds, read_MBps: size / MIB / readSeconds });
  }
  printTable('object transfer (s3rver, loopback)', transfer);

  const vector = (seed: number): number[] => Array.from({ length: DIM }, (_, i) => Math.sin(seed * 7.1 + i * 1.3));
  const rows: ChunkRow[] = [];
  const states: DocumentState[] = [];
  for (let d = 0; d < docs; d++) {
    for (let c = 0; c < perDoc; c++) {
      rows.push({ id: `r${d}-${c}`, document_id: `d${d}`, source: `s3://corpus/doc-${d}.pdf`, page: 1, chunk: c, text: `document ${d} chunk ${c} `.repeat(30), start: 0, end: 600, heading: null, settings: 's', vector: vector(d * perDoc + c), entities: null, labels: null, ingested_at: new Date().toISOString() });
    }
    states.push({ source: `s3://corpus/doc-${d}.pdf`, document_id: `d${d}`, settings: 's', chunks: perDoc, pages: 1, ingested_at: new Date().toISOString() });
  }
  const sink = new S3JsonStore({ uri: 's3://bench/index', store });
  await sink.prepare({ dimension: DIM, distance: 'cosine', optionalColumns: [], metadata: {} });
  const started = performance.now();
  for (let at = 0; at < docs; at += 100) await sink.commit(rows.slice(at * perDoc, (at + 100) * perDoc), states.slice(at, at + 100));
  const commitSeconds = (performance.now() - started) / 1000;
  const latencies: number[] = [];
  for (let q = 0; q <= queries; q++) {
    const t = performance.now();
    await sink.search(vector(q * 13 + 0.5), { k: 10 });
    latencies.push(performance.now() - t);
  }
  const [first, ...warm] = latencies;
  const sinkRow = { rows: rows.length, commit_rows_per_s: Math.round(rows.length / commitSeconds), first_search_ms: Math.round(first ?? 0), search_p50_ms: Math.round(percentile(warm, 50)), search_p99_ms: Math.round(percentile(warm, 99)) };
  printTable(`S3 sink (${docs} documents x ${perDoc} rows, ${DIM} dims, 100 documents per commit)`, [sinkRow]);
  console.log(`\nwritten to ${writeResult('s3', { transfer, sink: sinkRow })}`);
  await sink.close();
} finally {
  store.close();
  await server.stop();
}
