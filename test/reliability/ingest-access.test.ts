import { mkdir, mkdtemp, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Objm } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { PayloadStore } from '../../adapters/nats/connection/payloads.js';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { ErrorCode, isShoalError } from '../../adapters/protocol/errors.js';
import { S3Store } from '../../adapters/object-store/index.js';
import { IngestRunStatus } from '../../adapters/protocol/ingest.js';
import { natsNames } from '../../adapters/protocol/subjects.js';
import { resolvePipeline } from '../../pipelines/documents/builtin.js';
import { applyOverrides } from '../../pipelines/documents/definition.js';
import { IngestRuns } from '../../services/gateway/ingest-runs.js';
import { startGateway, type GatewayHandle } from '../../services/gateway/main.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { NATS_SERVER_MISSING, eventually, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, quietLogger, startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';
import { startS3Server, type S3ServerHandle } from '../helpers/s3-server.js';
import { reliabilityGatewayConfig } from './gateway-config.js';

/**
 * Issue 42, items 2, 6, 11 and 15, on the gateway as `shoal gateway` composes it (startGateway: the
 * wiring was where two of them hid) in front of a real worker in the parse role:
 * - 2: SHOAL_S3_BUCKETS decides an ingest source's bucket as it decides a job's target (one S3
 *   store for both); before, POST /v1/ingest read `s3://secret/…` that /v1/jobs refused.
 * - 6: an ingest run's models are checked (404 MODEL_NOT_FOUND, as /v1/jobs); before, the real
 *   gateway's jobs backend had no checkModel and every model passed. A parse task naming an OCR
 *   model that is neither built in nor served is refused by the parse worker itself.
 * - 11: a 400 MB sparse file:// document fails DOCUMENT_TOO_LARGE at once, the gateway's memory
 *   unmoved; before, the gateway read it (512 MiB payload bound) and the worker refused it later.
 * - 15: `obj://` sources and job targets only in this deployment's object stores.
 */

const ErrorBody = z.strictObject({ error: z.looseObject({ code: z.string(), message: z.string(), details: z.record(z.string(), z.unknown()).optional() }) });
const Accepted = z.looseObject({ job_id: z.string() });

function post(base: string, path: string, body: unknown): Promise<Response> {
  return fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

async function refusal(response: Response): Promise<{ status: number; code: string; message: string }> {
  const text = await response.text();
  expect(response.status, `refused, not accepted: ${text.slice(0, 300)}`).toBeGreaterThanOrEqual(400);
  const body = ErrorBody.parse(JSON.parse(text));
  return { status: response.status, code: body.error.code, message: body.error.message };
}

describe.skipIf(!natsServerAvailable())(`ingest access: buckets, models, sizes ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let dir: string;
  let server: NatsServerHandle;
  let s3: S3ServerHandle;
  let worker: ShoalWorker;
  let gateway: GatewayHandle;
  let nc: NatsConnection;
  const prefix = uniquePrefix('access');
  const lower = natsNames(prefix).payloadBucket.replace(/_payloads$/, '');
  const otherDeployment = natsNames(`${prefix}.other`).payloadBucket;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-ingest-access-'));
    await mkdir(join(dir, 'files'));
    await writeFile(join(dir, 'files', 'note.txt'), 'A small note inside the roots.');
    const sparse = join(dir, 'files', 'sparse.bin');
    await writeFile(sparse, '');
    await truncate(sparse, 400 * 1024 * 1024);
    s3 = await startS3Server(['allowed-docs', 'secret-docs']);
    const admin = new S3Store(s3.settings());
    await admin.write({ bucket: 'secret-docs', key: 'doc.txt' }, Buffer.from('the secret bucket says hello'));
    await admin.write({ bucket: 'allowed-docs', key: 'doc.txt' }, Buffer.from('the allowed bucket says hello'));
    admin.close();
    server = await startNatsServer();
    nc = await testConnection(server.url);
    // Another deployment's object store on the same server, holding a document.
    const other = await new Objm(nc).create(otherDeployment);
    await other.putBlob({ name: 'doc.txt' }, Buffer.from('another deployment'));
    worker = await startTestWorker(server.url, prefix, { parse: true, fileRoots: [join(dir, 'files')] });
    gateway = await startGateway({
      config: reliabilityGatewayConfig(server.url, prefix, {
        indexes: { docs: join(dir, 'index') },
        jobs: { jobTimeoutMs: 60_000, submitTimeoutMs: 60_000, fileRoots: [join(dir, 'files')], checkFileTargets: true, s3: s3.settings({ allowedBuckets: ['allowed-docs'] }) },
      }),
      logger: quietLogger(),
      metrics: new ShoalMetrics({ processMetrics: false }),
    });
  }, 120_000);

  afterAll(async () => {
    await gateway?.close();
    await nc?.close();
    await worker?.drain();
    await server?.stop();
    await s3?.stop();
    await rm(dir, { recursive: true, force: true });
  }, 60_000);

  const ingest = (sources: unknown[], extra: Record<string, unknown> = {}) => post(gateway.url, '/v1/ingest', { index: 'docs', model: TINY_MEAN, sources, ...extra });
  const job = (uri: string) => post(gateway.url, '/v1/jobs', { primitive: 'encode', request: { model: TINY_MEAN, items: ['a'] }, result: { kind: 'store', uri } });

  it('item 2: an s3:// source outside SHOAL_S3_BUCKETS is refused as a job target there is (422), nothing started', async () => {
    const target = await refusal(await job('s3://secret-docs/out'));
    expect(target).toMatchObject({ status: 422, code: 'INVALID_INPUT' });
    const source = await refusal(await ingest([{ ref: 's3://secret-docs/doc.txt' }], { job_id: 'secret-s3' }));
    expect(source).toMatchObject({ status: 422, code: 'INVALID_INPUT' });
    expect(source.message).toContain('SHOAL_S3_BUCKETS');
    expect((await fetch(`${gateway.url}/v1/jobs/secret-s3`)).status).toBe(404);
    // The allowed bucket is read with the same store (its endpoint and credentials): the document is indexed.
    const allowed = await ingest([{ ref: 's3://allowed-docs/doc.txt' }], { job_id: 'allowed-s3' });
    expect(allowed.status, await allowed.clone().text()).toBe(202);
    await eventually(async () => {
      const status = IngestRunStatus.parse(await (await fetch(`${gateway.url}/v1/jobs/allowed-s3`)).json());
      expect(status).toMatchObject({ state: 'completed', documents: { total: 1, ok: 1, failed: 0 } });
    }, 30_000);
  }, 60_000);

  it('item 6: an ingest run whose encode model or OCR model no worker serves is 404 MODEL_NOT_FOUND, nothing started', async () => {
    const encode = await refusal(await ingest([{ id: 'a', text: 'hello' }], { model: 'nobody/serves-this', job_id: 'unserved-encode' }));
    expect(encode).toMatchObject({ status: 404, code: 'MODEL_NOT_FOUND' });
    const definition = { name: 'hub-ocr', stages: { parse: { ocrModel: 'someone/hub-ocr-model' }, chunk: {}, encode: { model: TINY_MEAN } } };
    const ocr = await refusal(await ingest([{ id: 'a', text: 'hello' }], { pipeline: definition, job_id: 'unserved-ocr' }));
    expect(ocr).toMatchObject({ status: 404, code: 'MODEL_NOT_FOUND' });
    expect(ocr.message).toContain('someone/hub-ocr-model');
    expect((await fetch(`${gateway.url}/v1/jobs/unserved-encode`)).status).toBe(404);
    expect((await fetch(`${gateway.url}/v1/jobs/unserved-ocr`)).status).toBe(404);
  });

  it('item 15: obj:// sources and job targets in another deployment\'s bucket are refused (422); this deployment\'s buckets are not', async () => {
    const source = await refusal(await ingest([{ ref: `obj://${otherDeployment}/doc.txt` }], { job_id: 'foreign-obj' }));
    expect(source).toMatchObject({ status: 422, code: 'INVALID_INPUT' });
    expect(source.message).toContain('not this deployment');
    const target = await refusal(await job(`obj://${otherDeployment}/out`));
    expect(target).toMatchObject({ status: 422, code: 'INVALID_INPUT' });
    expect(target.message).toContain('not this deployment');
    // A results bucket of this deployment (`<p>-results`) is a fine target.
    await new Objm(nc).create(`${lower}-results`);
    expect((await job(`obj://${lower}-results/out`)).status).toBe(202);
    // What a worker does with a part's payload_ref or a parse task's ref: the same refusal, though the object exists.
    const payloads = new PayloadStore(nc, { bucket: natsNames(prefix).payloadBucket });
    const read: unknown = await payloads.get(`obj://${otherDeployment}/doc.txt`).catch((e: unknown) => e);
    expect(isShoalError(read) ? read.code : read).toBe(ErrorCode.INVALID_INPUT);
    expect(isShoalError(read) ? read.details : null).toMatchObject({ bucket: otherDeployment });
    const write: unknown = await payloads.write(`obj://${otherDeployment}/out`, 'job/part-0.jsonl', Buffer.from('{}')).catch((e: unknown) => e);
    expect(isShoalError(write) ? write.code : write).toBe(ErrorCode.INVALID_INPUT);
    const other = await new Objm(nc).open(otherDeployment);
    expect(await other.info('out/job/part-0.jsonl')).toBeNull();
  });

  it('item 11: a 400 MB sparse file:// document fails DOCUMENT_TOO_LARGE at once, the gateway never holding it', async () => {
    const before = process.memoryUsage().rss;
    const started = performance.now();
    const response = await ingest([{ ref: pathToFileURL(join(dir, 'files', 'sparse.bin')).href }], { job_id: 'sparse-run' });
    expect(response.status).toBe(202);
    const { job_id } = Accepted.parse(await response.json());
    let final: IngestRunStatus | null = null;
    await eventually(async () => {
      const status = IngestRunStatus.parse(await (await fetch(`${gateway.url}/v1/jobs/${job_id}`)).json());
      expect(['completed', 'partial', 'failed']).toContain(status.state);
      final = status;
    }, 30_000);
    const elapsed = performance.now() - started;
    expect(final).toMatchObject({ documents: { total: 1, ok: 0, failed: 1 } });
    const failed = (final as IngestRunStatus | null)?.failed ?? [];
    expect(failed).toEqual([expect.objectContaining({ code: 'DOCUMENT_TOO_LARGE', source: pathToFileURL(join(dir, 'files', 'sparse.bin')).href })]);
    expect(elapsed).toBeLessThan(10_000);
    // The gateway (and the worker: both in this process) never held the file: far under its 400 MB.
    expect(process.memoryUsage().rss - before).toBeLessThan(100 * 1024 * 1024);
  }, 60_000);

  it('item 6: a parse task naming an OCR model that is neither built in nor served (published past the gateway) fails MODEL_NOT_FOUND on the worker', async () => {
    const runs = new IngestRuns({ connection: () => nc, prefix, s3: {} });
    try {
      const base = await resolvePipeline(undefined);
      const definition = applyOverrides({ ...base, stages: { ...base.stages, parse: { ...base.stages.parse, ocrModel: 'someone/hub-ocr-model' } } }, { model: TINY_MEAN, index: 'docs' });
      const started = await runs.start({ job_id: 'forged-ocr', definition, index: { name: 'docs', target: join(dir, 'forged-index') }, records: [{ id: 'a', text: 'a text that needs no OCR at all' }], force: false });
      let final: IngestRunStatus | null = null;
      await eventually(async () => {
        const status = await runs.status(started.job_id);
        expect(['completed', 'partial', 'failed']).toContain(status?.state);
        final = status;
      }, 30_000);
      expect((final as IngestRunStatus | null)?.failed).toEqual([expect.objectContaining({ code: 'MODEL_NOT_FOUND', source: 'a' })]);
      expect((final as IngestRunStatus | null)?.failed[0]?.reason).toContain('someone/hub-ocr-model');
    } finally {
      await runs.close();
    }
  }, 60_000);
});
