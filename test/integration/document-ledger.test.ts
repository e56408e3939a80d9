import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DocumentLedger } from '../../adapters/nats/documents/ledger.js';
import { ensureDocumentTopology } from '../../adapters/nats/documents/topology.js';
import { ensureTopology } from '../../adapters/nats/connection/topology.js';
import type { DocumentEvent } from '../../adapters/protocol/documents.js';
import { natsServerAvailable, NATS_SERVER_MISSING, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { testConnection, uniquePrefix } from '../helpers/nats-worker.js';

/**
 * The document ledger's promise (adapters/nats/documents/ledger.ts): whatever the interleaving of
 * workers ending documents, repeating ends and counting, every document's first outcome stands and
 * counts exactly once in its run's status; the run ends when the announced number of documents
 * ended, whether the announcement comes first or last.
 */

function event(runId: string, doc: string, state: DocumentEvent['state'], worker: string): DocumentEvent {
  return { v: 1, run_id: runId, doc, source: `src/${doc}`, document_id: null, state, chunks: state === 'failed' ? 0 : 2, pages: 1, worker, finished_at: new Date().toISOString(), ...(state === 'failed' ? { code: 'DOCUMENT_CORRUPT', reason: 'broken' } : {}) };
}

describe.skipIf(!natsServerAvailable())('document ledger', () => {
  let server: NatsServerHandle;
  const connections: NatsConnection[] = [];
  const ledgers: DocumentLedger[] = [];

  beforeAll(async () => {
    server = await startNatsServer();
    const prefix = uniquePrefix('ledger');
    for (let n = 0; n < 3; n++) {
      const nc = await testConnection(server.url);
      connections.push(nc);
      const documents = await ensureDocumentTopology(nc, await ensureTopology(nc, { prefix }), []);
      ledgers.push(await DocumentLedger.open(nc, documents.ingest.bucket));
    }
  }, 30_000);

  afterAll(async () => {
    await Promise.all(connections.map((nc) => nc.close()));
    await server?.stop();
  });

  it(natsServerAvailable() ? 'counts each ended document once under concurrent, repeated ends and counts' : NATS_SERVER_MISSING, async () => {
    const runId = 'ledger-run-1';
    const docs = Array.from({ length: 120 }, (_, n) => `d${n}`);
    const stateOf = (n: number): DocumentEvent['state'] => (n % 10 === 0 ? 'failed' : n % 7 === 0 ? 'unchanged' : 'committed');
    // Three workers end overlapping thirds (every document ended by two of them, the second's outcome
    // differing), each counting after every few documents, all at once.
    const firsts = new Map<string, DocumentEvent>();
    await Promise.all(
      ledgers.map(async (ledger, w) => {
        for (let n = 0; n < docs.length; n++) {
          if (n % 3 === (w + 2) % 3) continue;
          const doc = docs[n] ?? '';
          const recorded = await ledger.end(event(runId, doc, w === 0 ? stateOf(n) : 'committed', `w${w}`));
          const first = firsts.get(doc);
          if (first === undefined) firsts.set(doc, recorded);
          else expect(recorded).toEqual(first);
          if (n % 5 === 0) await ledger.count(runId, { pipeline: 'p', index: 'i' });
        }
      }),
    );
    const ledger = ledgers[0];
    if (ledger === undefined) throw new Error('no ledger');
    const counted = await ledger.count(runId, { pipeline: 'p', index: 'i' });
    const expected = { ok: 0, failed: 0, unchanged: 0 };
    for (const first of firsts.values()) {
      if (first.state === 'committed') expected.ok += 1;
      else if (first.state === 'failed') expected.failed += 1;
      else expected.unchanged += 1;
    }
    expect(counted.status.documents).toEqual({ total: 120, ...expected });
    expect(counted.status.chunks).toBe(2 * (expected.ok + expected.unchanged));
    expect(counted.status.state).toBe('running');
    expect(counted.ended).toBeNull();
    // Counting again adds nothing.
    expect((await ledgers[1]?.count(runId, { pipeline: 'p', index: 'i' }))?.status.documents).toEqual(counted.status.documents);
    // The announcement after the fact ends the run.
    const announced = await ledger.announce({ v: 1, run_id: runId, expected: 120 }, { pipeline: 'p', index: 'i' });
    expect(announced.status.state).toBe(expected.failed > 0 ? 'partial' : 'completed');
    expect(announced.ended).toMatchObject({ run_id: runId, documents: { total: 120, ...expected } });
  }, 60_000);

  it(natsServerAvailable() ? 'ends a run announced first once its last document is counted, failed when every document failed' : NATS_SERVER_MISSING, async () => {
    const ledger = ledgers[2];
    if (ledger === undefined) throw new Error('no ledger');
    const runId = 'ledger-run-2';
    const first = await ledger.announce({ v: 1, run_id: runId, expected: 3 }, { pipeline: 'p', index: 'i' });
    expect(first.status).toMatchObject({ state: 'running', expected: 3, documents: { total: 3, ok: 0, failed: 0, unchanged: 0 } });
    for (const doc of ['a', 'b']) await ledger.end(event(runId, doc, 'failed', 'w'));
    expect((await ledger.count(runId, { pipeline: 'p', index: 'i' })).ended).toBeNull();
    await ledger.end(event(runId, 'c', 'failed', 'w'));
    const last = await ledger.count(runId, { pipeline: 'p', index: 'i' });
    expect(last.status.state).toBe('failed');
    expect(last.status.failed).toHaveLength(3);
    expect(last.ended).toMatchObject({ state: 'failed', documents: { total: 3, ok: 0, failed: 3, unchanged: 0 } });
  }, 30_000);
});
