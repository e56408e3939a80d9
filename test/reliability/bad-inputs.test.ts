import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { DEAD_LETTER_HEADERS } from '../../adapters/protocol/jobs.js';
import { startGateway, type GatewayHandle } from '../../services/gateway/main.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { NATS_SERVER_MISSING, eventually, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_CROSS, TINY_MEAN, encodePart, quietLogger, startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';
import { runShoal } from '../helpers/shoal-cli.js';
import { reliabilityGatewayConfig } from './gateway-config.js';

/**
 * The catalogue of bad inputs: every kind a careless or hostile caller can send, over HTTP, over
 * NATS (job parts and request-reply) and through the CLI, each with the exact code it must get.
 * Nothing here may answer a 5xx, hang, or leave work behind; the table is the contract.
 */

const TOKEN = 'reliability-token-0123456789';
const a = (n: number, item: unknown = 'a'): unknown[] => Array.from({ length: n }, () => item);

interface HttpCase {
  kind: string;
  method?: 'GET' | 'POST';
  path?: string;
  /** A string is sent as is (malformed JSON...); anything else as JSON. */
  body?: unknown;
  headers?: Record<string, string>;
  status: number;
  code: string;
}

const HTTP_CASES: readonly HttpCase[] = [
  { kind: 'body is not JSON', body: '{"model": ', status: 422, code: 'INVALID_INPUT' },
  { kind: 'empty body', body: '', status: 422, code: 'INVALID_INPUT' },
  { kind: 'text/plain body', body: 'hello', headers: { 'content-type': 'text/plain' }, status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' },
  { kind: 'binary body on a JSON route', path: '/v1/score', body: 'x'.repeat(100_000), headers: { 'content-type': 'application/octet-stream' }, status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' },
  { kind: 'gzip-encoded body', body: 'x', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' },
  { kind: 'body over the limit', body: JSON.stringify({ model: TINY_MEAN, items: ['x'.repeat(1_200_000)] }), status: 413, code: 'INPUT_TOO_LARGE' },
  { kind: 'JSON array instead of object', body: [1, 2], status: 422, code: 'INVALID_INPUT' },
  { kind: 'JSON null', body: 'null', status: 422, code: 'INVALID_INPUT' },
  { kind: 'deeply nested JSON', body: `${'['.repeat(5000)}${']'.repeat(5000)}`, status: 422, code: 'INVALID_INPUT' },
  { kind: 'items missing', body: { model: TINY_MEAN }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'items empty', body: { model: TINY_MEAN, items: [] }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'items is a string', body: { model: TINY_MEAN, items: 'a dog' }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'item text is a number', body: { model: TINY_MEAN, items: [{ text: 42 }] }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'too many items', body: { model: TINY_MEAN, items: a(100_001, '') }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'model missing', body: { items: ['a'] }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'model empty', body: { model: '', items: ['a'] }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'model with NUL byte', body: { model: 'tiny\u0000bert', items: ['a'] }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'model is a path traversal', body: { model: '../../etc/passwd', items: ['a'] }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'model is an absolute path', body: { model: '/etc/passwd', items: ['a'] }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'model longer than 1024 characters', body: { model: 'm'.repeat(1025), items: ['a'] }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'model unknown', body: { model: 'text-embedding-3-small', items: ['a'] }, status: 404, code: 'MODEL_NOT_FOUND' },
  { kind: 'unknown field', body: { model: TINY_MEAN, items: ['a'], temperature: 1 }, status: 422, code: 'INVALID_INPUT' },
  { kind: '__proto__ key', body: '{"model":"tiny-bert-mean","items":["a"],"__proto__":{"admin":true}}', status: 422, code: 'INVALID_INPUT' },
  { kind: 'max_length 0', body: { model: TINY_MEAN, items: ['a'], max_length: 0 }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'max_length 2^40', body: { model: TINY_MEAN, items: ['a'], max_length: 2 ** 40 }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'max_length fractional', body: { model: TINY_MEAN, items: ['a'], max_length: 1.5 }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'output_types unknown', body: { model: TINY_MEAN, items: ['a'], output_types: ['holographic'] }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'output type the model lacks', body: { model: TINY_MEAN, items: ['a'], output_types: ['sparse'] }, status: 400, code: 'UNSUPPORTED_OPERATION' },
  { kind: 'priority unknown', body: { model: TINY_MEAN, items: ['a'], priority: 'urgent' }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'text over 1,000,000 characters', body: { model: TINY_MEAN, items: ['x'.repeat(1_000_001)] }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'score top_k 2^40', path: '/v1/score', body: { model: TINY_CROSS, query: 'q', items: ['a'], top_k: 2 ** 40 }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'score without query', path: '/v1/score', body: { model: TINY_CROSS, items: ['a'] }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'extract threshold 2', path: '/v1/extract', body: { model: TINY_MEAN, items: ['a'], threshold: 2 }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'extract 257 labels', path: '/v1/extract', body: { model: TINY_MEAN, items: ['a'], labels: a(257, 'x') }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'extract on an embedder', path: '/v1/extract', body: { model: TINY_MEAN, items: ['a'] }, status: 400, code: 'UNSUPPORTED_OPERATION' },
  { kind: 'tokenize with a pair of the wrong type', path: '/v1/tokenize', body: { model: TINY_MEAN, items: [{ text: 'a', pair: 7 }] }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'openai embeddings with empty input', path: '/v1/embeddings', body: { model: TINY_MEAN, input: [] }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'openai embeddings for an unknown model', path: '/v1/embeddings', body: { model: 'gpt-4', input: ['a'] }, status: 404, code: 'MODEL_NOT_FOUND' },
  { kind: 'unknown route', path: '/v1/admin', body: {}, status: 404, code: 'NOT_FOUND' },
  { kind: 'job id with path characters', method: 'GET', path: '/v1/jobs/..%2F..%2Fetc', status: 422, code: 'INVALID_INPUT' },
  { kind: 'job that does not exist', method: 'GET', path: '/v1/jobs/never-was', status: 404, code: 'NOT_FOUND' },
  { kind: 'job with an unknown primitive', path: '/v1/jobs', body: { primitive: 'delete', request: { model: TINY_MEAN, items: ['a'] } }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'job with part_items 0', path: '/v1/jobs', body: { primitive: 'encode', request: { model: TINY_MEAN, items: ['a'] }, part_items: 0 }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'job id with spaces', path: '/v1/jobs', body: { job_id: 'a b', primitive: 'encode', request: { model: TINY_MEAN, items: ['a'] } }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'job result target over http', path: '/v1/jobs', body: { primitive: 'encode', request: { model: TINY_MEAN, items: ['a'] }, result: { kind: 'store', uri: 'http://evil/x' } }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'job for an unknown model', path: '/v1/jobs', body: { primitive: 'encode', request: { model: 'made-up', items: ['a'] } }, status: 404, code: 'MODEL_NOT_FOUND' },
  { kind: 'job with an invalid inner request', path: '/v1/jobs', body: { primitive: 'encode', request: { model: TINY_MEAN, items: [] } }, status: 422, code: 'INVALID_INPUT' },
  { kind: 'job id reused with other content', path: '/v1/jobs', body: { job_id: 'catalogue-job', primitive: 'encode', request: { model: TINY_MEAN, items: ['other'] } }, status: 409, code: 'JOB_CONFLICT' },
];

/** Job-part messages published straight on the jobs subject, and the dead-letter code each must get. */
const NATS_PART_CASES: readonly { kind: string; body: (subject: string) => string | Uint8Array; code: string }[] = [
  { kind: 'part that is not JSON', body: () => 'not json at all', code: 'INVALID_INPUT' },
  { kind: 'part that is binary garbage', body: () => new Uint8Array([0xff, 0xfe, 0x00, 0x01]), code: 'INVALID_INPUT' },
  { kind: 'part that is a JSON array', body: () => '[1,2,3]', code: 'INVALID_INPUT' },
  { kind: 'part of another wire version', body: () => JSON.stringify({ ...encodePart('nats-v2'), v: 2 }), code: 'INVALID_INPUT' },
  { kind: 'part with parts = 2^35', body: () => JSON.stringify({ ...encodePart('nats-huge'), parts: 2 ** 35, part: 2 ** 35 - 1 }), code: 'INVALID_INPUT' },
  { kind: 'part number not below parts', body: () => JSON.stringify({ ...encodePart('nats-beyond'), part: 3, parts: 3 }), code: 'INVALID_INPUT' },
  { kind: 'negative offset', body: () => JSON.stringify({ ...encodePart('nats-offset'), offset: -5 }), code: 'INVALID_INPUT' },
  { kind: 'both request and payload_ref', body: () => JSON.stringify({ ...encodePart('nats-both'), payload_ref: 'obj://b/x' }), code: 'INVALID_INPUT' },
  { kind: 'model differing from the subject', body: () => JSON.stringify({ ...encodePart('nats-subject'), model: TINY_CROSS, request: { model: TINY_CROSS, items: ['a'] } }), code: 'INVALID_INPUT' },
  { kind: 'submitted_at of a megabyte', body: () => JSON.stringify({ ...encodePart('nats-stamp'), submitted_at: 'x'.repeat(100_000) }), code: 'INVALID_INPUT' },
];


describe.skipIf(!natsServerAvailable())(`bad-input catalogue ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let worker: ShoalWorker;
  let gateway: GatewayHandle;
  let secured: GatewayHandle;
  let nc: NatsConnection;
  let jobs: JobsClient;
  const prefix = uniquePrefix('catalogue');

  beforeAll(async () => {
    server = await startNatsServer();
    worker = await startTestWorker(server.url, prefix, { models: [TINY_MEAN, TINY_CROSS] });
    const metrics = (): ShoalMetrics => new ShoalMetrics({ processMetrics: false });
    gateway = await startGateway({ config: reliabilityGatewayConfig(server.url, prefix, { bodyLimitBytes: 1024 * 1024 }), logger: quietLogger(), metrics: metrics() });
    secured = await startGateway({ config: reliabilityGatewayConfig(server.url, prefix, { apiTokens: [TOKEN] }), logger: quietLogger(), metrics: metrics() });
    nc = await testConnection(server.url);
    jobs = await JobsClient.open(nc, { topology: { prefix } });
    await jobs.submit({ job_id: 'catalogue-job', primitive: 'encode', request: { model: TINY_MEAN, items: ['first'] } });
  }, 120_000);

  afterAll(async () => {
    await secured?.close();
    await gateway?.close();
    await nc?.close();
    await worker?.drain();
    await server?.stop();
  });

  it(`answers each of ${HTTP_CASES.length} HTTP bad-input kinds with its documented code`, async () => {
    const got: string[] = [];
    const want: string[] = [];
    for (const c of HTTP_CASES) {
      const body = c.body === undefined ? undefined : typeof c.body === 'string' ? c.body : JSON.stringify(c.body);
      const response = await fetch(`${gateway.url}${c.path ?? '/v1/encode'}`, {
        method: c.method ?? 'POST',
        headers: { 'content-type': 'application/json', ...c.headers },
        ...(body === undefined ? {} : { body }),
      });
      const text = await response.text();
      let code = '?';
      try {
        code = (JSON.parse(text) as { error?: { code?: string } }).error?.code ?? '?';
      } catch {
        code = `unparsable: ${text.slice(0, 80)}`;
      }
      got.push(`${c.kind}: ${response.status} ${code}`);
      want.push(`${c.kind}: ${c.status} ${c.code}`);
    }
    expect(got).toEqual(want);
  }, 120_000);

  it('refuses missing and wrong bearer tokens with 401 UNAUTHORIZED', async () => {
    const cases: Record<string, string>[] = [{}, { authorization: 'Bearer wrong-token-000000000000' }, { authorization: 'Basic dXNlcjpwYXNz' }, { authorization: `Bearer ${TOKEN} extra` }];
    for (const headers of cases) {
      const response = await fetch(`${secured.url}/v1/encode`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ model: TINY_MEAN, items: ['a'] }) });
      expect([response.status, response.headers.get('www-authenticate')]).toEqual([401, 'Bearer realm="shoal"']);
    }
  });

  it(`dead-letters each of ${NATS_PART_CASES.length} malformed job-part kinds once, with its code, leaving the jobs stream empty`, async () => {
    const names = jobs.topology.names;
    const subject = names.jobs('encode', TINY_MEAN);
    const js = jetstream(nc);
    const dlqBefore = (await jobs.topology.jsm.streams.info(names.deadLetterStream)).state.last_seq;
    for (const c of NATS_PART_CASES) await js.publish(subject, c.body(subject));
    await eventually(async () => {
      const info = await jobs.topology.jsm.streams.info(names.deadLetterStream);
      expect(info.state.last_seq - dlqBefore).toBe(NATS_PART_CASES.length);
      const consumer = await jobs.topology.jsm.consumers.info(names.jobsStream, names.consumer('encode', TINY_MEAN));
      expect(consumer.num_pending + consumer.num_ack_pending).toBe(0);
    }, 20_000);
    const codes: string[] = [];
    for (let seq = dlqBefore + 1; seq <= dlqBefore + NATS_PART_CASES.length; seq++) {
      const dead = await jobs.topology.jsm.streams.getMessage(names.deadLetterStream, { seq });
      codes.push(dead?.header.get(DEAD_LETTER_HEADERS.code) ?? '?');
    }
    expect(codes).toEqual(NATS_PART_CASES.map((c) => c.code));
  }, 40_000);

  it('answers malformed request-reply calls with INVALID_INPUT replies, not silence', async () => {
    const names = jobs.topology.names;
    for (const body of ['{"model":', JSON.stringify({ model: TINY_MEAN, items: [] }), JSON.stringify({ model: TINY_MEAN, items: a(100_001, '') })]) {
      const reply = await nc.request(names.serving('encode', TINY_MEAN), body, { timeout: 10_000 });
      expect(reply.json<{ ok: boolean; error?: { code: string } }>()).toMatchObject({ ok: false, error: { code: 'INVALID_INPUT' } });
    }
  }, 30_000);

  it('refuses bad submissions from the CLI with their codes', async () => {
    const env = { NATS_URL: server.url, SHOAL_SUBJECT_PREFIX: prefix };
    const cases: { args: string[]; stdin: string; code: string; exit: number }[] = [
      { args: ['submit', 'delete', '--model', TINY_MEAN], stdin: '{"text":"a"}\n', code: 'INVALID_INPUT', exit: 2 },
      { args: ['submit', 'encode', '--model', '../../etc/passwd'], stdin: '{"text":"a"}\n', code: 'INVALID_INPUT', exit: 2 },
      { args: ['submit', 'encode', '--model', 'made-up-model'], stdin: '{"text":"a"}\n', code: 'MODEL_NOT_FOUND', exit: 1 },
      { args: ['submit', 'encode', '--model', TINY_MEAN, '--job-id', 'catalogue-job'], stdin: '{"text":"not the same"}\n', code: 'JOB_CONFLICT', exit: 2 },
    ];
    const outcomes = await Promise.all(cases.map((c) => runShoal(c.args, { stdin: c.stdin, env })));
    expect(outcomes.map((o) => [o.code, /error \[([A-Z_]+)\]/.exec(o.stderr)?.[1] ?? o.stderr.slice(0, 200)])).toEqual(cases.map((c) => [c.exit, c.code]));
  }, 90_000);
});
