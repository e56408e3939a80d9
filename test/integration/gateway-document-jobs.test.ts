import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { NatsConnection } from '@nats-io/transport-node';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import type { InferenceEngine } from '../../pipelines/inference/engine.js';
import { buildGatewayApp } from '../../services/gateway/app.js';
import { IngestRuns } from '../../services/gateway/ingest-runs.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { TEST_SETTINGS } from '../helpers/gateway.js';
import { readRows } from '../helpers/ingest-nats.js';
import { eventually, natsServerAvailable, NATS_SERVER_MISSING, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, referenceEngine, startTestWorker, testConnection } from '../helpers/nats-worker.js';

/**
 * POST /v1/ingest with SHOAL_DOCUMENT_JOBS (issue 35, item 4): the gateway publishes document jobs
 * and keeps nothing of the run. The gateway that took the run is closed at once; a second replica
 * (its own connection and IngestRuns) answers GET /v1/jobs/:id until the documents workers ended
 * the run, and the index holds every document. What a job cannot carry is refused (422), a
 * resubmission of the same id and content answers the same run, other content is 409.
 */

const Status = z.object({ job_id: z.string(), state: z.string(), documents: z.object({ total: z.number(), ok: z.number(), failed: z.number(), unchanged: z.number() }) }).passthrough();

describe.skipIf(!natsServerAvailable())('gateway: POST /v1/ingest as document jobs', () => {
  let root: string;
  let server: NatsServerHandle;
  const workers: ShoalWorker[] = [];
  const gateways: { app: FastifyInstance; ingest: IngestRuns; nc: NatsConnection; engine: InferenceEngine }[] = [];
  let index: string;
  let files: string;

  async function gateway(): Promise<FastifyInstance> {
    const nc = await testConnection(server.url);
    const jobs = await JobsClient.open(nc, { topology: { prefix: 'shoal' } });
    const ingest = new IngestRuns({ connection: () => nc, s3: {}, prefix: 'shoal', fileRoots: [files] });
    const engine = referenceEngine();
    const app = buildGatewayApp(
      { engine, jobs, ingest, models: async () => [], metrics: new ShoalMetrics(), ready: async () => ({ ready: true }) },
      { ...TEST_SETTINGS, natsPrefix: 'shoal', indexes: { docs: index }, documentJobs: true, pipelinesDir: join(root, 'pipelines') },
    );
    gateways.push({ app, ingest, nc, engine });
    return app;
  }

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'shoal-gw-docjobs-'));
    index = join(root, 'index');
    files = join(root, 'files');
    await mkdir(join(root, 'pipelines'));
    await mkdir(join(files, 'notes'), { recursive: true });
    await writeFile(join(root, 'pipelines', 'tiny.yaml'), `name: tiny\nstages:\n  encode:\n    model: ${TINY_MEAN}\n`);
    await writeFile(join(files, 'notes', 'harbor.md'), '# Harbor\n\nThe harbor master counts forty fishing boats every morning.');
    await writeFile(join(files, 'notes', 'orchard.txt'), 'Apple trees in the northern orchard bloom two weeks later.');
    server = await startNatsServer();
    workers.push(await startTestWorker(server.url, 'shoal'));
    workers.push(await startTestWorker(server.url, 'shoal', { models: [], documents: true, documentPipelines: ['tiny'], pipelinesDir: join(root, 'pipelines'), indexes: { docs: index }, fileRoots: [files], consumer: { ackWaitMs: 10_000, maxDeliver: 5 } }));
  }, 120_000);

  afterAll(async () => {
    for (const { app, ingest, nc, engine } of gateways) {
      await app.close().catch(() => undefined);
      await ingest.close().catch(() => undefined);
      await engine.close().catch(() => undefined);
      await nc.close().catch(() => undefined);
    }
    await Promise.all(workers.map((worker) => worker.close().catch(() => undefined)));
    await server?.stop();
    await rm(root, { recursive: true, force: true });
  }, 60_000);

  it(natsServerAvailable() ? 'publishes the run, survives the gateway closing at once, and any replica answers its status' : NATS_SERVER_MISSING, async () => {
    const first = await gateway();
    const records = Array.from({ length: 30 }, (_, n) => ({ id: `note-${n}`, text: `Note ${n}: the lighthouse lamp turns once every ${n + 5} seconds.` }));
    const sources = [...records, { ref: pathToFileURL(join(files, 'notes')).href }];
    const posted = await first.inject({ method: 'POST', url: '/v1/ingest', payload: { index: 'docs', pipeline: 'tiny', job_id: 'gw-jobs-1', sources } });
    expect(posted.statusCode, posted.body).toBe(202);
    expect(posted.headers.location).toBe('/v1/jobs/gw-jobs-1');
    // The replica that took the run goes away: nothing of the run lived in it.
    const taken = gateways[0];
    await taken?.app.close();
    await taken?.ingest.close();

    const second = await gateway();
    let final: z.infer<typeof Status> | null = null;
    await eventually(async () => {
      const status = await second.inject({ method: 'GET', url: '/v1/jobs/gw-jobs-1' });
      expect(status.statusCode, status.body).toBe(200);
      final = Status.parse(status.json());
      expect(final.state).toBe('completed');
    }, 90_000);
    expect(final).toMatchObject({ documents: { total: 32, ok: 32, failed: 0, unchanged: 0 } });
    const rows = await readRows(index);
    expect(new Set(rows.map((row) => row.source))).toEqual(new Set([...records.map((record) => record.id), join(files, 'notes', 'harbor.md'), join(files, 'notes', 'orchard.txt')]));
    // The Markdown file was read as Markdown (its heading recorded), through a file:// reference the worker read itself.
    expect(rows.find((row) => row.source.endsWith('harbor.md'))?.heading).toBe('Harbor');

    // The same id and content: the same run, nothing published again; other content: 409.
    const again = await second.inject({ method: 'POST', url: '/v1/ingest', payload: { index: 'docs', pipeline: 'tiny', job_id: 'gw-jobs-1', sources } });
    expect(again.statusCode).toBe(202);
    expect(Status.parse((again.json() as { status: unknown }).status).state).toBe('completed');
    const other = await second.inject({ method: 'POST', url: '/v1/ingest', payload: { index: 'docs', pipeline: 'tiny', job_id: 'gw-jobs-1', sources: records.slice(0, 2) } });
    expect(other.statusCode).toBe(409);

    // What a job cannot carry.
    const model = await second.inject({ method: 'POST', url: '/v1/ingest', payload: { index: 'docs', pipeline: 'tiny', model: TINY_MEAN, sources: records.slice(0, 1) } });
    expect(model.statusCode).toBe(422);
    expect(model.body).toContain('cannot travel with a document job');
    const inline = await second.inject({ method: 'POST', url: '/v1/ingest', payload: { index: 'docs', pipeline: { name: 'x', stages: {} }, sources: records.slice(0, 1) } });
    expect(inline.statusCode).toBe(422);
  }, 180_000);
});
