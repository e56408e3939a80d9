import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { ScoreResult } from '../../adapters/protocol/results.js';
import { openIndexUri } from '../../adapters/stores/open.js';
import type { ChunkRow } from '../../adapters/stores/store.js';
import { MAX_RERANK_CANDIDATES, MAX_RERANK_K } from '../../services/gateway/routes/search.js';
import { ErrorBody, localGateway } from '../helpers/gateway.js';
import { unitVectors } from '../helpers/seeded-vectors.js';

/**
 * Issue 42 item 10. `POST /v1/search` with `rerank` hands max(4k, 50) candidates to one score
 * call. With `k: 1000` that was 4,001 items (over the 2,048-item admission budget of a model),
 * admitted because a call alone always is, and every other call to the rerank model was refused
 * with 429 while it ran. Now a reranked search asks for at most MAX_RERANK_K hits (413
 * INPUT_TOO_LARGE naming `k` above), and its candidates hold the rerank model's budget like any
 * /v1/score call. The engine here is a stub whose score calls wait until the test releases them,
 * so what is in flight is known exactly; the index is a real LanceDB table.
 */

const DIMENSION = 8;
const ROWS = 700;
const RERANKER = 'rerank-model';

function row(i: number, vector: Float32Array): ChunkRow {
  return { id: `r${i}`, document_id: `d${i}`, source: `s${i}.txt`, page: 1, chunk: 0, text: `text ${i}`, start: 0, end: 6, heading: null, settings: 'x', vector, entities: null, labels: null, ingested_at: '2026-01-01T00:00:00Z' };
}

/** Score calls park here until released; `sizes` records the items of each. */
class ParkedScores {
  readonly sizes: number[] = [];
  #release: Array<() => void> = [];
  #arrived: Array<() => void> = [];

  engine(): Engine {
    const refuse = (): never => {
      throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'not in this test');
    };
    const [query] = unitVectors(1, DIMENSION, 7);
    return {
      encode: async (request) => ({ model: request.model, items: request.items.map((_item, index) => ({ index, dense: Array.from(query ?? []) })), usage: { items: request.items.length, tokens: 0 } }),
      score: async (request): Promise<ScoreResult> => {
        this.sizes.push(request.items.length);
        for (const arrived of this.#arrived.splice(0)) arrived();
        await new Promise<void>((resolve) => this.#release.push(resolve));
        return { model: request.model, scores: request.items.map((_item, index) => ({ index, score: -index })), usage: { items: request.items.length, tokens: 0 } };
      },
      extract: refuse,
      tokenize: refuse,
      close: async () => undefined,
    };
  }

  /** Resolves once `count` score calls are parked. */
  async parked(count: number): Promise<void> {
    while (this.#release.length < count) await new Promise<void>((resolve) => this.#arrived.push(resolve));
  }

  releaseAll(): void {
    for (const release of this.#release.splice(0)) release();
  }
}

describe('search: rerank candidates are bounded and admitted like any score call', () => {
  let dir: string;
  let app: FastifyInstance;
  const scores = new ParkedScores();

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-rerank-bound-'));
    const { store: sink } = openIndexUri(join(dir, 'index'));
    await sink.prepare({ dimension: DIMENSION, distance: 'cosine', optionalColumns: [], metadata: { model: 'encoder' } });
    const vectors = unitVectors(ROWS, DIMENSION, 1);
    // Rows count as ingested once their document's state is committed with them.
    await sink.commit(
      vectors.map((vector, i) => row(i, vector)),
      vectors.map((_vector, i) => ({ source: `s${i}.txt`, document_id: `d${i}`, settings: 'x', chunks: 1, pages: 1, ingested_at: '2026-01-01T00:00:00Z' })),
    );
    await sink.close();
    app = localGateway(scores.engine(), { indexes: { notes: join(dir, 'index') } });
  }, 30_000);

  afterAll(async () => {
    scores.releaseAll();
    await app?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it(`refuses k over ${MAX_RERANK_K} with rerank as 413 INPUT_TOO_LARGE naming k, before any model work`, async () => {
    const response = await app.inject({ method: 'POST', url: '/v1/search', payload: { query: 'boats', index: 'notes', k: 1000, rerank: RERANKER } });
    expect(response.statusCode).toBe(413);
    const body = ErrorBody.parse(response.json());
    expect(body.error.code).toBe(ErrorCode.INPUT_TOO_LARGE);
    expect(body.error.details).toMatchObject({ field: 'k', limit: MAX_RERANK_K });
    expect(body.error.message).toMatch(/^k: at most 128 with rerank/);
    expect(scores.sizes).toEqual([]);
    // Without rerank the same k is a plain search, still allowed.
    const plain = await app.inject({ method: 'POST', url: '/v1/search', payload: { query: 'boats', index: 'notes', k: 1000 } });
    expect(plain.statusCode, plain.body).toBe(200);
    expect(z.object({ hits: z.array(z.unknown()) }).parse(plain.json()).hits).toHaveLength(ROWS);
  });

  it('a reranked search at the limit holds its candidates in the model budget: other callers still fit, an over-budget score is refused', async () => {
    // inject() sends only once its answer is asked for: then() starts it now.
    const search = app.inject({ method: 'POST', url: '/v1/search', payload: { query: 'boats', index: 'notes', k: MAX_RERANK_K, rerank: RERANKER } }).then((response) => response);
    await Promise.race([scores.parked(1), search.then((r) => { throw new Error(`search answered first: ${r.statusCode} ${r.body}`); })]);
    expect(scores.sizes).toEqual([MAX_RERANK_CANDIDATES]);
    // 513 items in flight of 2,048: an ordinary encode of the rerank model is admitted at once.
    const encode = await app.inject({ method: 'POST', url: '/v1/encode', payload: { model: RERANKER, items: Array.from({ length: 64 }, (_v, i) => `item ${i}`) } });
    expect(encode.statusCode).toBe(200);
    // A score call that would take the model past its budget is refused: the rerank is counted.
    const big = await app.inject({ method: 'POST', url: '/v1/score', payload: { model: RERANKER, query: 'q', items: Array.from({ length: 1600 }, (_v, i) => `doc ${i}`) } });
    expect(big.statusCode).toBe(429);
    const refusal = ErrorBody.parse(big.json());
    expect(refusal.error.code).toBe(ErrorCode.OVERLOADED);
    expect(refusal.error.details).toMatchObject({ model: RERANKER, inFlightItems: MAX_RERANK_CANDIDATES + 1 });
    scores.releaseAll();
    const answered = await search;
    expect(answered.statusCode).toBe(200);
    const { hits } = z.object({ hits: z.array(z.object({ rank: z.number(), score: z.number() })) }).parse(answered.json());
    expect(hits).toHaveLength(MAX_RERANK_K);
    // Ranked by the reranker's scores (the stub scores candidate i as -i).
    expect(hits[0]).toEqual(expect.objectContaining({ rank: 1, score: 0 }));
  });
});
