import type { NatsConnection } from '@nats-io/transport-node';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { NatsEngine } from '../../adapters/nats/rpc/engine-client.js';
import { DEFAULT_LIMITS } from '../../adapters/protocol/limits.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { CONFORMANCE_DIR, missingReason } from '../helpers/shared.js';
import { expectAllClose, loadConformance, numberMatrix, type ConformanceModel } from '../helpers/conformance.js';
import { localGateway } from '../helpers/gateway.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';
import { jsonl, parseJsonl, runShoal } from '../helpers/shoal-cli.js';

/**
 * The two Qwen3 ONNX layouts of the kit through every entry point: the KV-cache embedder through
 * `shoal encode`, /v1/encode and NATS request-reply, the causal-LM reranker's custom_instruction case through `shoal score
 * --instruction`, /v1/score and TEI /rerank (`instruction`), and NATS request-reply.
 */

const RerankInputs = z.looseObject({ query: z.string(), documents: z.array(z.string()), instruction: z.string() });
const RerankExpected = z.looseObject({ scores: z.array(z.number()) });
const Scored = z.looseObject({ index: z.number().int(), score: z.number() });

const embedder = loadConformance('qwen3-kv-embed');
const reranker = loadConformance('qwen3-reranker');

function customInstruction(model: ConformanceModel): { inputs: z.infer<typeof RerankInputs>; scores: number[] } {
  const kase = model.cases.cases.find((c) => c.id === 'custom_instruction');
  return { inputs: RerankInputs.parse(kase?.inputs), scores: RerankExpected.parse(kase?.expected).scores };
}

function expectScores(got: readonly z.infer<typeof Scored>[], want: readonly number[], atol: number): void {
  expect(got).toHaveLength(want.length);
  for (const { index, score } of got) expect(Math.abs(score - (want[index] ?? Number.NaN)), `item ${index}`).toBeLessThanOrEqual(atol);
}

describe.skipIf(embedder === null || reranker === null)(`Qwen3 layouts on every surface ${embedder === null ? missingReason(CONFORMANCE_DIR) : ''}`, () => {
  const embed = embedder as ConformanceModel;
  const rerank = reranker as ConformanceModel;
  const { inputs, scores } = customInstruction(rerank);
  const documentsCase = embed.cases.cases.find((c) => c.id === 'documents');
  const texts = z.looseObject({ texts: z.array(z.string()) }).parse(documentsCase?.inputs).texts;
  const embeddings = numberMatrix(z.looseObject({ embeddings: z.unknown() }).parse(documentsCase?.expected).embeddings, 'embeddings');
  const Dense = z.looseObject({ dense: z.array(z.number()) });

  it('shoal encode: the KV-cache embedder reproduces the documents case', async () => {
    const expected = embeddings;
    const run = await runShoal(['encode', '--model', embed.dir], { stdin: jsonl(texts.map((text, id) => ({ id, text }))) });
    expect(run.code, run.stderr).toBe(0);
    const lines = parseJsonl(run.stdout, z.looseObject({ id: z.number(), dense: z.array(z.number()) }));
    lines.forEach((line, i) => expectAllClose(line.dense, expected[i] ?? [], embed.atol, `line ${i}`));
  });

  it('shoal score --instruction: the custom_instruction case', async () => {
    const run = await runShoal(['score', '--model', rerank.dir, '--instruction', inputs.instruction], {
      stdin: jsonl([{ id: 'q', query: inputs.query, items: inputs.documents }]),
    });
    expect(run.code, run.stderr).toBe(0);
    const [line] = parseJsonl(run.stdout, z.looseObject({ id: z.string(), scores: z.array(Scored) }));
    expectScores(line?.scores ?? [], scores, rerank.atol);
  });

  describe('HTTP', () => {
    let engine: InferenceEngine;
    let app: FastifyInstance;
    beforeAll(() => {
      engine = new InferenceEngine({ runtime: { intraOpThreads: 1 } });
      app = localGateway(engine, { rerankModel: rerank.dir });
    });
    afterAll(async () => {
      await app.close();
      await engine.close();
    });

    it('/v1/encode: the KV-cache embedder reproduces the documents case', async () => {
      const response = await app.inject({ method: 'POST', url: '/v1/encode', payload: { model: embed.dir, items: texts } });
      expect(response.statusCode, response.body).toBe(200);
      const items = z.looseObject({ items: z.array(Dense) }).parse(response.json()).items;
      expect(items).toHaveLength(texts.length);
      items.forEach((item, i) => expectAllClose(item.dense, embeddings[i] ?? [], embed.atol, `item ${i}`));
    });

    it('/v1/score with instruction', async () => {
      const response = await app.inject({ method: 'POST', url: '/v1/score', payload: { model: rerank.dir, query: inputs.query, items: inputs.documents, instruction: inputs.instruction } });
      expect(response.statusCode, response.body).toBe(200);
      expectScores(z.looseObject({ scores: z.array(Scored) }).parse(response.json()).scores, scores, rerank.atol);
    });

    it('TEI /rerank with instruction, and without it the default instruction', async () => {
      const response = await app.inject({ method: 'POST', url: '/rerank', payload: { query: inputs.query, texts: inputs.documents, instruction: inputs.instruction } });
      expect(response.statusCode, response.body).toBe(200);
      expectScores(z.array(Scored).parse(response.json()), scores, rerank.atol);
      const plain = await app.inject({ method: 'POST', url: '/rerank', payload: { query: inputs.query, texts: inputs.documents } });
      const first = z.array(Scored).parse(plain.json()).find((s) => s.index === 0)?.score ?? Number.NaN;
      expect(Math.abs(first - (scores[0] ?? 0))).toBeGreaterThan(10 * rerank.atol);
    });

    it('an instruction longer than the prompt limit is refused by the wire schema', async () => {
      const instruction = 'x'.repeat(DEFAULT_LIMITS.maxPromptChars + 1);
      for (const [url, payload] of [
        ['/rerank', { query: 'q', texts: ['d'], instruction }],
        ['/v1/score', { model: rerank.dir, query: 'q', items: ['d'], instruction }],
      ] as const) {
        const response = await app.inject({ method: 'POST', url, payload });
        expect(response.statusCode, url).toBe(422);
      }
    });
  });

  describe.skipIf(!natsServerAvailable())(`NATS ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
    let server: NatsServerHandle;
    let worker: ShoalWorker;
    let nc: NatsConnection;
    const prefix = uniquePrefix('qwen3');
    beforeAll(async () => {
      server = await startNatsServer();
      worker = await startTestWorker(server.url, prefix, { engine: { modelDirs: [CONFORMANCE_DIR], threads: 1, memoryBudget: '2GiB' }, models: ['qwen3-reranker', 'qwen3-kv-embed'] });
      nc = await testConnection(server.url);
    });
    afterAll(async () => {
      await worker?.drain();
      await nc?.close();
      await server?.stop();
    });

    it('request-reply encode: the KV-cache embedder reproduces the documents case', async () => {
      const engine = new NatsEngine(nc, { prefix, timeoutMs: 60_000 });
      const result = await engine.encode({ model: 'qwen3-kv-embed', items: texts.map((text, i) => ({ id: String(i), text })) });
      expect(result.items).toHaveLength(texts.length);
      result.items.forEach((item, i) => expectAllClose(item.dense ?? [], embeddings[i] ?? [], embed.atol, `item ${i}`));
    });

    it('request-reply score with instruction', async () => {
      const engine = new NatsEngine(nc, { prefix, timeoutMs: 60_000 });
      const result = await engine.score({ model: 'qwen3-reranker', query: inputs.query, items: inputs.documents, instruction: inputs.instruction });
      expectScores(result.scores, scores, rerank.atol);
    });
  });
});
