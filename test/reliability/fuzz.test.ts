import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { ERROR_TRAITS, isShoalError } from '../../adapters/protocol/errors.js';
import { JobPart, JobPartResult, JobStatus, JobSubmission, RpcReplyEnvelope, WIRE_VERSION, WorkerInfo } from '../../adapters/protocol/jobs.js';
import { DEFAULT_LIMITS } from '../../adapters/protocol/limits.js';
import { EncodeRequest, ExtractRequest, ScoreRequest, TokenizeRequest } from '../../adapters/protocol/requests.js';
import { parseWith } from '../../adapters/protocol/validate.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { buildGatewayApp } from '../../services/gateway/app.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { MemoryJobs, TEST_SETTINGS } from '../helpers/gateway.js';
import { NATS_SERVER_MISSING, eventually, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { FIXTURE_MODELS_DIR, TINY_CROSS, TINY_MEAN, startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';

/**
 * Property-based fuzzing of every wire schema (fast-check): generated requests, job parts,
 * results, statuses and replies, near-valid and arbitrary. Properties:
 * - a schema either accepts a value or refuses it with INVALID_INPUT, quickly, and what it
 *   accepts respects the bounds (no part count a worker cannot afford);
 * - over HTTP, every generated request is answered, within a deadline, with a 2xx or a
 *   documented 4xx (never a 5xx), and memory stays bounded;
 * - over NATS, every generated job part leaves the jobs stream (done, refused or dead-lettered)
 *   while the worker's memory stays bounded.
 * The default run is sized for CI; SHOAL_RELIABILITY_FULL=1 runs 10,000 cases per property.
 */

const FULL = process.env.SHOAL_RELIABILITY_FULL === '1';
const SCHEMA_RUNS = FULL ? 10_000 : 1_000;
const HTTP_RUNS = FULL ? 10_000 : 300;
const NATS_PARTS = FULL ? 10_000 : 120;
const SEED = Number(process.env.SHOAL_FUZZ_SEED ?? 20_260_313);

/** Numbers where bounds break: huge, negative, fractional, not finite, around 2^31/2^35/2^53. */
const hostileNumber = fc.oneof(
  fc.integer({ min: -5, max: 10 }),
  fc.constantFrom(2 ** 31, 2 ** 31 - 1, 2 ** 32, 2 ** 35, 2 ** 40, Number.MAX_SAFE_INTEGER, -1, 0.5, 1e308, -0),
  fc.double(),
  fc.integer(),
);
const modelName = fc.oneof(fc.constantFrom(TINY_MEAN, TINY_CROSS, '', '../../etc/passwd', 'a\u0000b', 'x'.repeat(1100)), fc.string({ maxLength: 40 }));
const itemArb = fc.oneof(
  fc.string({ maxLength: 60 }),
  fc.record({ text: fc.string({ maxLength: 60 }) }),
  fc.record({ text: fc.string({ maxLength: 20 }), id: fc.oneof(fc.string({ maxLength: 10 }), hostileNumber), role: fc.constantFrom('query', 'document', 'other') }, { requiredKeys: ['text'] }),
  fc.record({ image: fc.oneof(fc.string({ maxLength: 30 }), fc.record({ url: fc.webUrl() }), fc.record({ path: fc.string({ maxLength: 30 }) })) }),
  fc.anything({ maxDepth: 2 }),
);
const items = fc.array(itemArb, { maxLength: 12 });

/** Hostile values for each request field: one replaces a valid field in a near-valid request. */
const hostileRequestFields = fc.record(
  {
    model: modelName,
    items,
    query: fc.oneof(fc.string({ maxLength: 30 }), fc.anything({ maxDepth: 1 })),
    max_length: hostileNumber,
    top_k: hostileNumber,
    threshold: hostileNumber,
    labels: fc.array(fc.string({ maxLength: 10 }), { maxLength: 5 }),
    output_types: fc.array(fc.constantFrom('dense', 'sparse', 'multivector', 'bogus'), { maxLength: 3 }),
    priority: fc.constantFrom('interactive', 'bulk', 'now'),
    normalize: fc.anything({ maxDepth: 0 }),
    prompt: fc.string({ maxLength: 20 }),
  },
  { requiredKeys: [] },
);
const texts = fc.array(fc.string({ minLength: 1, maxLength: 40 }), { minLength: 1, maxLength: 8 });
const validRequest = fc.oneof(
  fc.record({ model: fc.constantFrom(TINY_MEAN, TINY_CROSS), items: texts }),
  fc.record({ model: fc.constantFrom(TINY_MEAN, TINY_CROSS), query: fc.string({ minLength: 1, maxLength: 30 }), items: texts }),
);
/** Requests of the primitives: valid ones, near-valid ones (one field hostile), and arbitrary values. */
const requestArb = fc.oneof(
  { arbitrary: validRequest, weight: 4 },
  { arbitrary: fc.tuple(validRequest, hostileRequestFields).map(([valid, hostile]) => ({ ...valid, ...hostile })), weight: 3 },
  { arbitrary: hostileRequestFields, weight: 1 },
  { arbitrary: fc.anything({ maxDepth: 3 }), weight: 1 },
);

const validPart = fc.record({
  v: fc.constant(WIRE_VERSION),
  job_id: fc.stringMatching(/^[A-Za-z0-9_-]{1,20}$/),
  part: fc.constant(0),
  parts: fc.constant(1),
  primitive: fc.constant('encode'),
  model: fc.constant(TINY_MEAN),
  request: fc.record({ model: fc.constant(TINY_MEAN), items: texts }),
  result: fc.constant({ kind: 'stream' }),
  submitted_at: fc.constant(new Date(0).toISOString()),
});
const hostilePartFields = fc.record(
  {
    v: hostileNumber,
    job_id: fc.string({ maxLength: 80 }),
    part: hostileNumber,
    parts: hostileNumber,
    primitive: fc.constantFrom('encode', 'score', 'extract', 'delete'),
    model: modelName,
    request: requestArb,
    payload_ref: fc.oneof(fc.constant('obj://x/y'), fc.constant('file:///etc/passwd'), fc.string({ maxLength: 20 })),
    offset: hostileNumber,
    result: fc.oneof(fc.record({ kind: fc.constant('store'), uri: fc.string({ maxLength: 30 }) }), fc.anything({ maxDepth: 1 })),
    submitted_at: fc.string({ maxLength: 30 }),
  },
  { requiredKeys: [] },
);
/** Job parts: valid, near-valid (some fields hostile), arbitrary. */
const partArb = fc.oneof(
  { arbitrary: validPart, weight: 3 },
  { arbitrary: fc.tuple(validPart, hostilePartFields).map(([valid, hostile]) => ({ ...valid, ...hostile })), weight: 5 },
  { arbitrary: fc.anything({ maxDepth: 3 }), weight: 1 },
);

const SCHEMAS: readonly { name: string; schema: z.ZodType; arb: fc.Arbitrary<unknown> }[] = [
  { name: 'EncodeRequest', schema: EncodeRequest, arb: requestArb },
  { name: 'ScoreRequest', schema: ScoreRequest, arb: requestArb },
  { name: 'ExtractRequest', schema: ExtractRequest, arb: requestArb },
  { name: 'TokenizeRequest', schema: TokenizeRequest, arb: requestArb },
  { name: 'JobPart', schema: JobPart, arb: partArb },
  { name: 'JobSubmission', schema: JobSubmission, arb: fc.record({ job_id: fc.string({ maxLength: 70 }), primitive: fc.constantFrom('encode', 'score', 'x'), request: requestArb, part_items: hostileNumber }, { requiredKeys: [] }) },
  { name: 'JobPartResult', schema: JobPartResult, arb: fc.oneof(partArb, fc.record({ v: fc.constant(1), job_id: fc.string(), part: hostileNumber, parts: hostileNumber, status: fc.constantFrom('ok', 'error'), worker: fc.string(), finished_at: fc.string(), primitive: fc.constant('encode'), model: fc.string() })) },
  { name: 'JobStatus', schema: JobStatus, arb: fc.oneof(partArb, fc.record({ v: fc.constant(1), job_id: fc.string(), parts: hostileNumber, parts_done: hostileNumber, items: hostileNumber, errors: fc.array(fc.anything({ maxDepth: 1 }), { maxLength: 25 }) }, { requiredKeys: [] })) },
  { name: 'RpcReplyEnvelope', schema: RpcReplyEnvelope, arb: fc.oneof(fc.record({ ok: fc.boolean(), result: fc.anything({ maxDepth: 2 }), error: fc.anything({ maxDepth: 2 }), worker: fc.string() }, { requiredKeys: [] }), fc.anything({ maxDepth: 2 })) },
  { name: 'WorkerInfo', schema: WorkerInfo, arb: fc.anything({ maxDepth: 3 }) },
];

/** The slowest a generated input may take to be validated (ms). */
const SLOWEST_MS = 250;

describe('wire schemas under generated input', () => {
  for (const { name, schema, arb } of SCHEMAS) {
    it(`${name}: accepts or refuses with INVALID_INPUT, quickly, ${SCHEMA_RUNS} cases`, () => {
      let slowest = 0;
      let accepted = 0;
      let refused = 0;
      fc.assert(
        fc.property(arb, (value) => {
          const started = performance.now();
          try {
            const parsed: unknown = parseWith(schema, value, name);
            if (schema === JobPart) {
              const part = JobPart.parse(parsed);
              expect(part.parts).toBeLessThanOrEqual(DEFAULT_LIMITS.maxJobParts);
              expect(part.part).toBeLessThan(part.parts);
            }
            accepted++;
          } catch (error) {
            if (!isShoalError(error) || error.code !== 'INVALID_INPUT') throw error;
            refused++;
          }
          let elapsed = performance.now() - started;
          // A slow case is timed again: a pathological input is slow every time, while a collection
          // or a descheduled moment on a loaded machine (268 ms once in CI, 3 lanes on 2 cores) is not.
          for (let again = 0; again < 2 && elapsed >= SLOWEST_MS; again++) {
            const retried = performance.now();
            try {
              parseWith(schema, value, name);
            } catch {
              // Refused again, as the first time: only the time is wanted here.
            }
            elapsed = Math.min(elapsed, performance.now() - retried);
          }
          slowest = Math.max(slowest, elapsed);
        }),
        { numRuns: SCHEMA_RUNS, seed: SEED },
      );
      expect(slowest).toBeLessThan(SLOWEST_MS);
      expect(refused).toBeGreaterThan(0);
      // The generators reach past validation for the schemas that take requests and parts.
      if (name.endsWith('Request') || name === 'JobPart') expect(accepted).toBeGreaterThan(SCHEMA_RUNS / 10);
    }, 120_000);
  }
});

/** Statuses a request may be answered with: success, or a documented client-side code. */
const ALLOWED_STATUSES = new Set([200, 202, 207, ...Object.values(ERROR_TRAITS).filter((t) => t.httpStatus < 500).map((t) => t.httpStatus)]);

describe('HTTP under generated requests', () => {
  let engine: InferenceEngine;
  let app: FastifyInstance;

  beforeAll(async () => {
    engine = new InferenceEngine({ sources: { modelDirs: [FIXTURE_MODELS_DIR], allowDownload: false }, runtime: { intraOpThreads: 1 }, interactiveSessions: false });
    app = buildGatewayApp(
      {
        engine,
        jobs: new MemoryJobs(),
        models: async () => [{ id: TINY_MEAN }, { id: TINY_CROSS }],
        metrics: new ShoalMetrics({ processMetrics: false }),
        ready: async () => ({ ready: true }),
      },
      TEST_SETTINGS,
    );
    await app.ready();
  }, 60_000);

  afterAll(async () => {
    await app?.close();
    await engine?.close();
  });

  it(`answers ${HTTP_RUNS} generated requests with 2xx or a documented 4xx, each within 10 s, memory bounded`, async () => {
    const rssBefore = process.memoryUsage().rss;
    const seen = new Map<number, number>();
    /** A valid body per route, then maybe one hostile field, or garbage on any route. */
    const validCall = fc.oneof(
      fc.record({ url: fc.constant('/v1/encode'), body: fc.record({ model: fc.constant(TINY_MEAN), items: texts }) }),
      fc.record({ url: fc.constant('/v1/score'), body: fc.record({ model: fc.constant(TINY_CROSS), query: fc.string({ minLength: 1, maxLength: 30 }), items: texts }) }),
      fc.record({ url: fc.constant('/v1/tokenize'), body: fc.record({ model: fc.constant(TINY_MEAN), items: texts }) }),
      fc.record({ url: fc.constant('/v1/embeddings'), body: fc.record({ model: fc.constant(TINY_MEAN), input: texts }) }),
      fc.record({ url: fc.constant('/v1/jobs'), body: fc.record({ primitive: fc.constant('encode'), request: fc.record({ model: fc.constant(TINY_MEAN), items: texts }) }) }),
    );
    const call = fc.oneof(
      { arbitrary: validCall.map(({ url, body }) => ({ url, payload: JSON.stringify(body) })), weight: 4 },
      { arbitrary: fc.tuple(validCall, hostileRequestFields).map(([{ url, body }, hostile]) => ({ url, payload: JSON.stringify({ ...body, ...hostile }) })), weight: 4 },
      {
        arbitrary: fc.record({
          url: fc.constantFrom('/v1/encode', '/v1/score', '/v1/extract', '/v1/tokenize', '/v1/jobs', '/v1/embeddings', '/embed', '/rerank'),
          payload: fc.oneof(requestArb.map((r) => JSON.stringify(r) ?? 'null'), fc.string({ maxLength: 200 })),
        }),
        weight: 2,
      },
    );
    await fc.assert(
      fc.asyncProperty(call, async ({ url, payload }) => {
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<never>((_resolve, reject) => {
          timer = setTimeout(() => reject(new Error(`${url} did not answer within 10 s: ${payload.slice(0, 200)}`)), 10_000);
        });
        try {
          const response = await Promise.race([app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload }), late]);
          seen.set(response.statusCode, (seen.get(response.statusCode) ?? 0) + 1);
          if (!ALLOWED_STATUSES.has(response.statusCode)) throw new Error(`${url} answered ${response.statusCode} ${response.body.slice(0, 300)} to ${payload.slice(0, 300)}`);
        } finally {
          clearTimeout(timer);
        }
      }),
      { numRuns: HTTP_RUNS, seed: SEED },
    );
    console.info(`http fuzz: ${HTTP_RUNS} cases, statuses ${JSON.stringify(Object.fromEntries(seen))}, rss +${((process.memoryUsage().rss - rssBefore) / 2 ** 20).toFixed(0)} MiB`);
    expect((seen.get(200) ?? 0) + (seen.get(202) ?? 0)).toBeGreaterThan(HTTP_RUNS / 5);
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(512 * 2 ** 20);
  }, FULL ? 1_800_000 : 120_000);
});

describe.skipIf(!natsServerAvailable())(`job parts under generated input ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let worker: ShoalWorker;
  let nc: NatsConnection;
  let jobs: JobsClient;
  const prefix = uniquePrefix('fuzz');

  beforeAll(async () => {
    server = await startNatsServer();
    worker = await startTestWorker(server.url, prefix, { models: [TINY_MEAN], consumer: { ackWaitMs: 2_000, maxDeliver: 2 } });
    nc = await testConnection(server.url);
    jobs = await JobsClient.open(nc, { topology: { prefix } });
  }, 60_000);

  afterAll(async () => {
    await worker?.drain();
    await nc?.close();
    await server?.stop();
  });

  it(`${NATS_PARTS} generated job parts all leave the jobs stream, worker memory bounded`, async () => {
    const subject = jobs.topology.names.jobs('encode', TINY_MEAN);
    const js = jetstream(nc);
    const samples = fc.sample(partArb, { numRuns: NATS_PARTS, seed: SEED });
    const rssBefore = process.memoryUsage().rss;
    for (const [i, sample] of samples.entries()) {
      // Half keep the subject's model and primitive so they get past the envelope into the worker.
      const body = i % 2 === 0 && typeof sample === 'object' && sample !== null && !Array.isArray(sample) ? { ...sample, primitive: 'encode', model: TINY_MEAN } : sample;
      await js.publish(subject, JSON.stringify(body) ?? 'undefined');
    }
    await eventually(async () => {
      const info = await jobs.topology.jsm.streams.info(jobs.topology.names.jobsStream);
      expect(info.state.messages).toBe(0);
    }, FULL ? 600_000 : 60_000);
    expect(worker.state).toBe('running');
    // Some parts were valid enough to run: their jobs have statuses.
    const statuses = await Promise.all(
      samples.filter((x): x is { job_id: string } => typeof x === 'object' && x !== null && 'job_id' in x && typeof x.job_id === 'string' && /^[A-Za-z0-9_-]{1,64}$/.test(x.job_id)).map((x) => jobs.status(x.job_id)),
    );
    expect(statuses.filter((x) => x !== null).length).toBeGreaterThan(0);
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(512 * 2 ** 20);
  }, FULL ? 900_000 : 120_000);
});
