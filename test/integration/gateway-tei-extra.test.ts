import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import type { Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import type { GatewayDeps, GatewaySettings } from '../../services/gateway/context.js';
import { ModelFactsCache } from '../../services/gateway/model-facts.js';
import { expectAllClose } from '../helpers/conformance.js';
import { ErrorBody, localGateway } from '../helpers/gateway.js';
import { FIXTURES_DIR } from '../helpers/shared.js';
import { loadTinyModel, tokenOutputs } from '../helpers/tiny-model.js';

/**
 * The TEI and OpenAI routes a migrating client calls besides /embed, /rerank and /v1/embeddings:
 * TEI's /info, /tokenize and /embed_sparse, OpenAI's GET /v1/models/{id}, and empty inputs, which
 * both APIs refuse. Real models (the tiny fixtures) through the in-process engine; expected tokens
 * and weights come from the fixtures' own vocabularies and weights.
 */

const MODELS_DIR = join(FIXTURES_DIR, 'models');
const ATOL = 2e-5;
const bert = loadTinyModel('tiny-bert-mean');
const splade = loadTinyModel('tiny-splade');
const PACKAGE_VERSION = z.object({ version: z.string() }).parse(JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'))).version;

const TeiToken = z.strictObject({ id: z.number().int(), text: z.string(), special: z.boolean(), start: z.number().int().nullable(), stop: z.number().int().nullable() });
const TokenizeResponse = z.array(z.array(TeiToken));
const SparseResponse = z.array(z.array(z.strictObject({ index: z.number().int(), value: z.number() })));

let engine: InferenceEngine;
let app: FastifyInstance;
let metrics: ShoalMetrics;

function gateway(settings: Partial<GatewaySettings> = {}, overrides: Partial<GatewayDeps> = {}): FastifyInstance {
  return localGateway(engine, settings, overrides);
}

/** A gateway used by one test only, closed after it. */
async function withGateway(settings: Partial<GatewaySettings>, overrides: Partial<GatewayDeps>, use: (gw: FastifyInstance) => Promise<void>): Promise<void> {
  const gw = gateway(settings, overrides);
  try {
    await use(gw);
  } finally {
    await gw.close();
  }
}

/** TEI's token of a special id: its token string, no offsets. */
const special = (token: string): z.infer<typeof TeiToken> => ({ id: bert.id(token), text: token, special: true, start: null, stop: null });
/** A text token with its UTF-8 byte offsets. */
const word = (token: string, text: string, start: number, stop: number): z.infer<typeof TeiToken> => ({ id: bert.id(token), text, special: false, start, stop });

beforeAll(async () => {
  engine = new InferenceEngine({ sources: { modelDirs: [MODELS_DIR], allowDownload: false }, runtime: { intraOpThreads: 1 }, interactiveSessions: false });
  metrics = new ShoalMetrics({ processMetrics: false });
  app = gateway({}, { metrics });
  await app.ready();
});
afterAll(async () => {
  await app.close();
  await engine.close();
});

describe('TEI GET /info', () => {
  it("describes the embed model in TEI's shape, with its real maximum input length", async () => {
    const response = await app.inject({ method: 'GET', url: '/info' });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({
      model_id: 'tiny-bert-mean',
      model_sha: null,
      model_dtype: 'float32',
      served_model_name: 'tiny-bert-mean',
      model_type: { embedding: { pooling: 'unknown' } },
      max_concurrent_requests: 2048,
      // tiny-bert-mean's sentence_bert_config.json says max_seq_length 24.
      max_input_length: 24,
      max_batch_tokens: 24,
      max_batch_requests: null,
      max_client_batch_size: 100_000,
      auto_truncate: false,
      tokenization_workers: null,
      version: PACKAGE_VERSION,
      sha: null,
      docker_label: null,
    });
  });

  it('describes the rerank model as a reranker when no embed model is set, and a prefixed SPLADE model as splade', async () => {
    const models = async (): Promise<Array<{ id: string; family?: string }>> => [{ id: 'tiny-splade', family: 'splade' }, { id: 'tiny-cross-encoder', family: 'cross-encoder' }];
    await withGateway({ embedModel: null }, { models }, async (gw) => {
      const rerank = await gw.inject({ method: 'GET', url: '/info' });
      expect(rerank.statusCode).toBe(200);
      // The cross-encoder reads pairs: its maximum is 32 tokens.
      expect(rerank.json()).toMatchObject({ model_id: 'tiny-cross-encoder', model_type: { reranker: { id2label: {}, label2id: {} } }, max_input_length: 32 });
      const sparse = await gw.inject({ method: 'GET', url: '/models/tiny-splade/info' });
      expect(sparse.statusCode).toBe(200);
      expect(sparse.json()).toMatchObject({ model_id: 'tiny-splade', model_type: { embedding: { pooling: 'splade' } }, max_input_length: 24 });
    });
  });

  it('answers 404 for an unknown prefixed model and names the flags when no model is configured', async () => {
    const unknown = await app.inject({ method: 'GET', url: '/models/no-such/model/info' });
    expect([unknown.statusCode, ErrorBody.parse(unknown.json()).error.code]).toEqual([404, 'MODEL_NOT_FOUND']);
    await withGateway({ embedModel: null, rerankModel: null }, {}, async (gw) => {
      const none = await gw.inject({ method: 'GET', url: '/info' });
      expect(none.statusCode).toBe(404);
      expect(ErrorBody.parse(none.json()).error).toMatchObject({ code: 'MODEL_NOT_FOUND', message: expect.stringContaining('--embed-model') });
    });
    const post = await app.inject({ method: 'POST', url: '/info', payload: {} });
    expect([post.statusCode, post.headers.allow]).toEqual([405, 'GET']);
  });
});

describe('TEI POST /tokenize', () => {
  it('returns ids, the text each covers as UTF-8 byte offsets, and the special tokens flagged', async () => {
    const response = await app.inject({ method: 'POST', url: '/tokenize', payload: { inputs: 'a dog' } });
    expect(response.statusCode).toBe(200);
    expect(TokenizeResponse.parse(response.json())).toEqual([[special('[CLS]'), word('a', 'a', 0, 1), word('dog', 'dog', 2, 5), special('[SEP]')]]);
  });

  it('counts offsets in bytes past multi-byte characters (a 3-byte snowman, a 4-byte emoji), each input of a batch on its own', async () => {
    const response = await app.inject({ method: 'POST', url: '/tokenize', payload: { inputs: ['a \u2603 dog', 'a \u{1F600} dog'] } });
    expect(response.statusCode).toBe(200);
    const [snowman, emoji] = TokenizeResponse.parse(response.json());
    // Out of the tiny vocabulary, each symbol is one [UNK] covering the whole character.
    expect(snowman).toEqual([special('[CLS]'), word('a', 'a', 0, 1), word('[UNK]', '\u2603', 2, 5), word('dog', 'dog', 6, 9), special('[SEP]')]);
    expect(emoji).toEqual([special('[CLS]'), word('a', 'a', 0, 1), word('[UNK]', '\u{1F600}', 2, 6), word('dog', 'dog', 7, 10), special('[SEP]')]);
    // The offsets are bytes: they slice the UTF-8 input to the token's text.
    const bytes = Buffer.from('a \u{1F600} dog', 'utf8');
    for (const token of emoji ?? []) {
      if (!token.special) expect(bytes.subarray(token.start ?? 0, token.stop ?? 0).toString('utf8')).toBe(token.text);
    }
  });

  it('leaves the special tokens out with add_special_tokens false, and uses a prefixed model (byte-level BPE)', async () => {
    const plain = await app.inject({ method: 'POST', url: '/tokenize', payload: { inputs: ['a dog'], add_special_tokens: false } });
    expect(plain.statusCode).toBe(200);
    expect(TokenizeResponse.parse(plain.json())).toEqual([[word('a', 'a', 0, 1), word('dog', 'dog', 2, 5)]]);
    const roberta = loadTinyModel('tiny-roberta-mean');
    const bpe = await app.inject({ method: 'POST', url: '/models/tiny-roberta-mean/tokenize', payload: { inputs: 'a dog' } });
    expect(bpe.statusCode).toBe(200);
    expect(TokenizeResponse.parse(bpe.json())).toEqual([
      [
        { id: roberta.id('<s>'), text: '<s>', special: true, start: null, stop: null },
        { id: roberta.id('a'), text: 'a', special: false, start: 0, stop: 1 },
        // "Ġdog" is " dog": its offsets cover the word, as a fast tokenizer's with trim_offsets.
        { id: roberta.id('\u0120dog'), text: 'dog', special: false, start: 2, stop: 5 },
        { id: roberta.id('</s>'), text: '</s>', special: true, start: null, stop: null },
      ],
    ]);
  });

  it('refuses an input longer than the model reads (413 with its token count), an empty one, and prompt_name', async () => {
    const long = await app.inject({ method: 'POST', url: '/tokenize', payload: { inputs: ['a dog', 'a '.repeat(40)] } });
    expect(long.statusCode).toBe(413);
    expect(ErrorBody.parse(long.json()).error).toMatchObject({ code: 'INPUT_TOO_LARGE', details: { index: 1, tokens: 42, maxTokens: 24 } });
    for (const inputs of ['', ['a', '']]) {
      const empty = await app.inject({ method: 'POST', url: '/tokenize', payload: { inputs } });
      expect([empty.statusCode, ErrorBody.parse(empty.json()).error.code], JSON.stringify(inputs)).toEqual([422, 'INVALID_INPUT']);
    }
    const prompt = await app.inject({ method: 'POST', url: '/tokenize', payload: { inputs: 'a dog', prompt_name: 'query' } });
    expect([prompt.statusCode, ErrorBody.parse(prompt.json()).error.code]).toEqual([400, 'UNSUPPORTED_OPERATION']);
  });

  it('bounds the characters of one request, whose offsets the gateway locates itself', async () => {
    await withGateway({ bodyLimitBytes: 4 * 2 ** 20 }, {}, async (gw) => {
      const response = await gw.inject({ method: 'POST', url: '/tokenize', payload: { inputs: ['a '.repeat(300_000), 'b '.repeat(300_000)] } });
      expect(response.statusCode).toBe(413);
      expect(ErrorBody.parse(response.json()).error).toMatchObject({ code: 'INPUT_TOO_LARGE', details: { limitChars: 1_000_000 } });
    });
  });

  it('counts /tokenize under the tokenize primitive and the model', async () => {
    const response = await app.inject({ method: 'POST', url: '/tokenize', payload: { inputs: 'dog' } });
    expect(response.statusCode).toBe(200);
    const { body } = await metrics.render();
    expect(body).toMatch(/shoal_requests_total\{[^}]*primitive="tokenize"[^}]*model="tiny-bert-mean"[^}]*code="OK"[^}]*\} [1-9]/);
  });
});

describe('TEI POST /embed_sparse', () => {
  /** SPLADE term weights of a token sequence: max over positions of log(1 + relu(logit)). */
  function weights(tokens: readonly string[]): number[] {
    const logits = tokenOutputs(splade, { ids: splade.ids(tokens) });
    const out = new Array<number>(logits[0]?.length ?? 0).fill(0);
    for (const row of logits) row.forEach((x, v) => (out[v] = Math.max(out[v] ?? 0, Math.log1p(Math.max(x, 0)))));
    return out;
  }

  function densify(values: ReadonlyArray<{ index: number; value: number }>, size: number): number[] {
    const out = new Array<number>(size).fill(0);
    for (const { index, value } of values) out[index] = value;
    return out;
  }

  it("returns each input's non-zero term weights as [{index, value}], ascending, from the prefixed SPLADE model", async () => {
    const response = await app.inject({ method: 'POST', url: '/models/tiny-splade/embed_sparse', payload: { inputs: ['a dog', 'dogs and cats'] } });
    expect(response.statusCode).toBe(200);
    const [dog, cats] = SparseResponse.parse(response.json());
    for (const [label, values, tokens] of [
      ['a dog', dog ?? [], ['[CLS]', 'a', 'dog', '[SEP]']],
      ['dogs and cats', cats ?? [], ['[CLS]', 'dogs', 'and', 'cats', '[SEP]']],
    ] as const) {
      const expected = weights(tokens);
      const indices = values.map((entry) => entry.index);
      expect(indices, label).toEqual([...indices].sort((a, b) => a - b));
      expect(values.every((entry) => entry.value > 0), label).toBe(true);
      expectAllClose(densify(values, expected.length), expected, ATOL, label);
      expect(values.length, label).toBeGreaterThan(5);
    }
  });

  it('uses the configured sparse model, else the embed model (refused when it has no sparse output), and refuses what /embed refuses', async () => {
    await withGateway({ sparseModel: 'tiny-splade' }, {}, async (gw) => {
      const configured = await gw.inject({ method: 'POST', url: '/embed_sparse', payload: { inputs: 'a dog' } });
      expect(configured.statusCode).toBe(200);
      const expected = weights(['[CLS]', 'a', 'dog', '[SEP]']);
      expectAllClose(densify(SparseResponse.parse(configured.json())[0] ?? [], expected.length), expected, ATOL, 'configured');
    });
    const dense = await app.inject({ method: 'POST', url: '/embed_sparse', payload: { inputs: 'a dog' } });
    expect(dense.statusCode).toBe(400);
    expect(ErrorBody.parse(dense.json()).error).toMatchObject({ code: 'UNSUPPORTED_OPERATION', message: expect.stringContaining('sparse') });
    const long = await app.inject({ method: 'POST', url: '/models/tiny-splade/embed_sparse', payload: { inputs: 'a '.repeat(40) } });
    expect([long.statusCode, ErrorBody.parse(long.json()).error.code]).toEqual([413, 'INPUT_TOO_LARGE']);
    const cut = await app.inject({ method: 'POST', url: '/models/tiny-splade/embed_sparse', payload: { inputs: 'a '.repeat(40), truncate: true } });
    expect(cut.statusCode).toBe(200);
    const empty = await app.inject({ method: 'POST', url: '/models/tiny-splade/embed_sparse', payload: { inputs: [''] } });
    expect([empty.statusCode, ErrorBody.parse(empty.json()).error.code]).toEqual([422, 'INVALID_INPUT']);
  });
});

describe('model facts of /info and /tokenize', () => {
  it('probes each model once (single-flight), keeps at most 256 names, and forgets a failed probe', async () => {
    const probed: string[] = [];
    let failing = true;
    const fake: Engine = {
      encode: async () => Promise.reject(new Error('unused')),
      score: async () => Promise.reject(new Error('unused')),
      extract: async () => Promise.reject(new Error('unused')),
      close: async () => undefined,
      tokenize: async (request) => {
        probed.push(request.model);
        if (request.model === 'flaky' && failing) throw new ShoalError(ErrorCode.UNAVAILABLE, 'no worker yet');
        return { model: request.model, items: [{ index: 0, ids: [1, 2], tokens: ['<s>', '</s>'], truncated: false, length: 2 }, { index: 1, ids: [1, 7, 7, 2], tokens: ['<s>', 'a', 'a', '</s>'], truncated: true, length: 9 }] };
      },
    };
    const facts = new ModelFactsCache(fake);
    const [first, second] = await Promise.all([facts.get('m0'), facts.get('m0')]);
    expect(first).toEqual({ maxInputLength: 4, templateIds: [1, 2] });
    expect(second).toBe(first);
    expect(probed).toEqual(['m0']);
    for (let i = 1; i <= 256; i++) await facts.get(`m${i}`);
    expect(probed).toHaveLength(257);
    // m0 was the oldest of 257 names: forgotten, so probed again; m256 is still known.
    await facts.get('m256');
    await facts.get('m0');
    expect(probed.slice(257)).toEqual(['m0']);
    await expect(facts.get('flaky')).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    failing = false;
    await expect(facts.get('flaky')).resolves.toMatchObject({ maxInputLength: 4 });
  });
});

describe('OpenAI GET /v1/models/{id}', () => {
  const models = async (): Promise<Array<{ id: string; family?: string; resident?: boolean }>> => [
    { id: 'BAAI/bge-small-en-v1.5', family: 'dense', resident: true },
    { id: 'tiny-bert-mean' },
  ];

  it("answers one model in OpenAI's shape, its id holding a slash raw or %-encoded", async () => {
    await withGateway({}, { models }, async (gw) => {
      for (const url of ['/v1/models/BAAI/bge-small-en-v1.5', '/v1/models/BAAI%2Fbge-small-en-v1.5']) {
        const response = await gw.inject({ method: 'GET', url });
        expect(response.statusCode, url).toBe(200);
        expect(response.json(), url).toEqual({ id: 'BAAI/bge-small-en-v1.5', object: 'model', created: 0, owned_by: 'shoal', family: 'dense', resident: true });
      }
      const plain = await gw.inject({ method: 'GET', url: '/v1/models/tiny-bert-mean' });
      expect(plain.json()).toEqual({ id: 'tiny-bert-mean', object: 'model', created: 0, owned_by: 'shoal' });
    });
  });

  it('answers 404 MODEL_NOT_FOUND for an unknown id, and 405 for another method', async () => {
    await withGateway({}, { models }, async (gw) => {
      for (const url of ['/v1/models/BAAI/no-such-model', '/v1/models/BAAI', '/v1/models/', `/v1/models/${'x'.repeat(2000)}`]) {
        const response = await gw.inject({ method: 'GET', url });
        expect(response.statusCode, url).toBe(404);
        const error = ErrorBody.parse(response.json()).error;
        expect(error.code, url).toBe('MODEL_NOT_FOUND');
        expect(error.message.length, url).toBeLessThan(400);
      }
      const post = await gw.inject({ method: 'POST', url: '/v1/models/BAAI/bge-small-en-v1.5', payload: {} });
      expect([post.statusCode, post.headers.allow]).toEqual([405, 'GET']);
      // The list is unchanged.
      const list = await gw.inject({ method: 'GET', url: '/v1/models' });
      expect(z.object({ object: z.literal('list'), data: z.array(z.object({ id: z.string() })) }).parse(list.json()).data.map((m) => m.id)).toEqual(['BAAI/bge-small-en-v1.5', 'tiny-bert-mean']);
    });
  });
});

describe('empty inputs', () => {
  it('/v1/embeddings refuses "", [""], [] and an empty string in a list, naming input, in the shape of its other validation errors', async () => {
    const cases: Array<[input: unknown, path: string]> = [
      ['', 'input'],
      [[''], 'input.0'],
      [['a dog', ''], 'input.1'],
      [[], 'input'],
    ];
    for (const [input, path] of cases) {
      const response = await app.inject({ method: 'POST', url: '/v1/embeddings', payload: { model: 'tiny-bert-mean', input } });
      expect(response.statusCode, JSON.stringify(input)).toBe(422);
      const error = ErrorBody.parse(response.json()).error;
      expect(error.code).toBe('INVALID_INPUT');
      expect(error.message, JSON.stringify(input)).toMatch(new RegExp(`^invalid embeddings request: ${path.replace('.', '\\.')}: .*empty`));
    }
    // A non-empty input still embeds.
    const ok = await app.inject({ method: 'POST', url: '/v1/embeddings', payload: { model: 'tiny-bert-mean', input: ['a dog'] } });
    expect(ok.statusCode).toBe(200);
  });

  it('TEI /embed refuses an empty input as TEI does ("`inputs` cannot be empty")', async () => {
    for (const inputs of ['', [''], ['a dog', ''], []]) {
      const response = await app.inject({ method: 'POST', url: '/embed', payload: { inputs } });
      expect(response.statusCode, JSON.stringify(inputs)).toBe(422);
      expect(ErrorBody.parse(response.json()).error).toMatchObject({ code: 'INVALID_INPUT', message: expect.stringMatching(/^invalid embed request: inputs.*: must not be empty$/) });
    }
  });
});
