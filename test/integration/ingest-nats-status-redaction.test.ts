import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolvePipeline } from '../../pipelines/documents/builtin.js';
import { NatsIngest } from '../../pipelines/documents/nats-ingest.js';
import { natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { testConnection, uniquePrefix } from '../helpers/nats-worker.js';

/**
 * The status of an ingest run lives in the NATS ingest bucket (`run.<id>`), which every worker,
 * gateway and `GET /v1/jobs/<id>` reads. `shoal ingest --nats --index postgres://user:PASSWORD@…`
 * must not write the password there: the status names the index as the summary prints it.
 */

describe.skipIf(!natsServerAvailable())('ingest run status over NATS', () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await testConnection(server.url);
  }, 60_000);
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  it('records the index with its password replaced by ***', async () => {
    const ingest = await NatsIngest.open(nc, { prefix: uniquePrefix('redact') });
    try {
      const runId = randomUUID();
      const definition = await resolvePipeline(undefined);
      const claim = await ingest.claim({ runId, definition, index: 'postgres://shoal:S3cr/et@db.example:5432/search?table=docs', total: 1, contentHash: '0'.repeat(64) });
      if ('lease' in claim) claim.lease.stop();
      const status = await ingest.status(runId);
      expect(status?.index).toBe('postgres://shoal:***@db.example:5432/search?table=docs');
      expect(JSON.stringify(status)).not.toContain('S3cr');
    } finally {
      await ingest.close();
    }
  }, 60_000);
});
