import { createHash } from 'node:crypto';
import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ParseTaskClient } from '../../adapters/nats/ingest/parse-client.js';
import { ParseTaskConsumer, type ParseAnswer, type ParseFn } from '../../adapters/nats/ingest/parse-consumer.js';
import { PayloadStore } from '../../adapters/nats/connection/payloads.js';
import { REQUEUE_HEADERS } from '../../adapters/nats/jobs/requeue.js';
import { ensureTopology, type Topology } from '../../adapters/nats/connection/topology.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { testConnection, uniquePrefix } from '../helpers/nats-worker.js';

/**
 * An ingest parse task that its worker's shutdown interrupts is handed back, not nak'ed: with
 * max_deliver 1 (so a nak would end it), the task survives two interrupted workers and a third
 * parses it; the copies carry their requeue count. A task that really fails is still ended.
 */

const SETTINGS = { ocr: 'never', ocrModel: 'paddleocr/pp-ocrv4', ocrDpi: 150, maxBytes: 1_000_000, maxPages: 100 } as const;

describe.skipIf(!natsServerAvailable())(`parse tasks handed back at shutdown ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let topology: Topology;
  let client: ParseTaskClient;

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await testConnection(server.url);
    topology = await ensureTopology(nc, { prefix: uniquePrefix('handback') });
    client = await ParseTaskClient.open(nc, topology, { ackWaitMs: 5_000, maxDeliver: 1 });
  }, 60_000);

  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  const consumer = (workerId: string, parse: ParseFn): ParseTaskConsumer =>
    new ParseTaskConsumer({
      js: jetstream(nc),
      names: client.names,
      status: client.status,
      payloads: new PayloadStore(nc, { bucket: topology.names.payloadBucket }),
      parse,
      deadLetters: client.deadLetters,
      concurrency: 1,
      ackWaitMs: 5_000,
      maxDeliver: 1,
      workerId,
    });

  /** A worker whose parse runs until the worker stops, then fails CANCELLED (its engine closing). */
  async function interrupted(workerId: string): Promise<number> {
    let requeues = -1;
    let release: () => void = () => undefined;
    const stopped = new Promise<void>((resolve) => (release = resolve));
    let began: () => void = () => undefined;
    const started = new Promise<void>((resolve) => (began = resolve));
    const worker = consumer(workerId, async () => {
      began();
      await stopped;
      throw new ShoalError(ErrorCode.CANCELLED, 'the worker is stopping');
    });
    const js = jetstream(nc);
    worker.start();
    await started;
    const closing = worker.close();
    release();
    await closing;
    const info = await (await js.consumers.get(client.names.stream, client.names.parseConsumer)).info();
    const last = await topology.jsm.streams.getMessage(client.names.stream, { last_by_subj: client.names.parseSubject });
    requeues = Number(last?.header?.get(REQUEUE_HEADERS.count) ?? '0');
    expect(info.num_ack_pending).toBe(0);
    return requeues;
  }

  it('survives two interrupted workers with max_deliver 1, and the third parses it', async () => {
    const text = 'The pilot boat leaves at dawn.';
    const bytes = new TextEncoder().encode(text);
    const documentId = createHash('sha256').update(bytes).digest('hex');
    await client.submit({ run_id: 'handback-run', doc: 0, source: 'n1', id: 'n1', document_id: documentId, inline_text: true, parse: SETTINGS }, bytes);
    expect(await interrupted('w1')).toBe(1);
    expect(await interrupted('w2')).toBe(2);
    const parsed: ParseAnswer = { ok: true, type: 'text', pages: [{ page: 1, text, ocr: false }] };
    const worker = consumer('w3', async () => parsed);
    worker.start();
    await expect.poll(async () => (await client.status.document('handback-run', 0))?.state, { timeout: 20_000, interval: 100 }).toBe('parsed');
    await worker.close();
  }, 60_000);
});
