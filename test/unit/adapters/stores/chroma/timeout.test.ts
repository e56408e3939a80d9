import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, isShoalError, type ShoalError } from '../../../../../adapters/protocol/errors.js';
import { ChromaStore } from '../../../../../adapters/stores/chroma/store.js';
import { RetryingStore } from '../../../../../adapters/stores/shared/delivery.js';
import { openIndexUri } from '../../../../../adapters/stores/open.js';
import { sinkCredentialsFromEnv } from '../../../../../services/settings/environment.js';
import { freePort } from '../../../../helpers/nats-server.js';

/**
 * The Chroma sink against HTTP servers that accept its connections and never finish an answer (a
 * hung Chroma, or a proxy in front of a dead one). Without a bound each call waited for undici's
 * 300-s headers timeout; with `requestTimeoutMs` it fails with TIMEOUT, naming the store and the
 * bound, which RetryingStore retries like any outage. Chroma itself works through the same sink in
 * chroma-sink.test.ts.
 */

interface Hung {
  readonly port: number;
  /** Requests the server received, as `METHOD path`. */
  readonly requests: string[];
  close(): Promise<void>;
}

const servers: Hung[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

/** A loopback HTTP server whose handler `answer`s (by default: not at all). */
async function hungServer(answer: (request: IncomingMessage, response: ServerResponse) => void = () => {}): Promise<Hung> {
  const requests: string[] = [];
  const server: Server = createServer((request, response) => {
    requests.push(`${request.method} ${request.url}`);
    answer(request, response);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  const hung: Hung = {
    port,
    requests,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  servers.push(hung);
  return hung;
}

/** The call's failure and how long it took to come. */
async function failure(call: () => Promise<unknown>): Promise<{ error: ShoalError; ms: number }> {
  const started = performance.now();
  try {
    await call();
  } catch (error) {
    if (!isShoalError(error)) throw error;
    return { error, ms: performance.now() - started };
  }
  throw new Error('the call succeeded');
}

describe('ChromaStore against a server that accepts connections and never answers', () => {
  it('fails a call with TIMEOUT after the request timeout, naming the store and the bound', async () => {
    const server = await hungServer();
    const sink = new ChromaStore({ host: '127.0.0.1', port: server.port, collection: 'coll', requestTimeoutMs: 1_000 });
    const { error, ms } = await failure(() => sink.describe());
    expect(error.code).toBe(ErrorCode.TIMEOUT);
    expect(error.message).toBe(`chroma list: no answer from collection coll on chroma://127.0.0.1:${server.port} within the 1000 ms request timeout`);
    expect(error.details).toEqual({ timeoutMs: 1_000 });
    expect(error.traits.retryable).toBe(true);
    expect(ms).toBeGreaterThanOrEqual(950);
    expect(ms).toBeLessThan(5_000);
    // It was the server's silence, not a refused connection, that failed the call.
    expect(server.requests).toEqual([expect.stringMatching(/^GET \/api\/v2\/tenants\/.+\/collections/)]);
    await sink.close();
  });

  it('bounds every kind of call, search and writes included', async () => {
    const server = await hungServer();
    const sink = new ChromaStore({ host: '127.0.0.1', port: server.port, collection: 'coll', requestTimeoutMs: 300 });
    const spec = { dimension: 2, distance: 'l2' as const, optionalColumns: [], metadata: {} };
    const state = { source: 's', document_id: 'd', settings: 's', chunks: 0, pages: 1, ingested_at: 'now' };
    for (const call of [() => sink.prepare(spec), () => sink.search([0, 0], { k: 1 }), () => sink.states(['s']), () => sink.commit([], [state]), () => sink.remove(['s'])]) {
      const { error, ms } = await failure(call);
      expect(error.code).toBe(ErrorCode.TIMEOUT);
      expect(ms).toBeLessThan(3_000);
    }
    expect(server.requests.length).toBe(5);
  });

  it('also bounds an answer whose body stops arriving', async () => {
    const server = await hungServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.write('[');
    });
    const sink = new ChromaStore({ host: '127.0.0.1', port: server.port, collection: 'coll', requestTimeoutMs: 500 });
    const { error, ms } = await failure(() => sink.describe());
    expect(error).toMatchObject({ code: ErrorCode.TIMEOUT, message: expect.stringContaining('within the 500 ms request timeout') });
    expect(ms).toBeLessThan(5_000);
  });

  it('is retried by RetryingStore like any other outage, which then fails with UNAVAILABLE', async () => {
    const server = await hungServer();
    const retried: string[] = [];
    const sink = new RetryingStore(new ChromaStore({ host: '127.0.0.1', port: server.port, collection: 'coll', requestTimeoutMs: 200 }), 'chroma', { baseDelayMs: 10, maxDelayMs: 20, maxElapsedMs: 1_000 }, {
      write: () => {},
      retrying: (_backend, failed) => retried.push(failed.code),
    });
    const { error, ms } = await failure(() => sink.describe());
    expect(error.code).toBe(ErrorCode.UNAVAILABLE);
    expect(error.message).toMatch(/^chroma describe: still failing after [2-9]\d* attempts in \d+ s: chroma list: no answer from collection coll on chroma:\/\/127\.0\.0\.1:\d+ within the 200 ms request timeout$/);
    expect(retried.length).toBeGreaterThanOrEqual(1);
    expect(new Set(retried)).toEqual(new Set([ErrorCode.TIMEOUT]));
    expect(ms).toBeLessThan(5_000);
  });

  it('keeps a refused connection UNAVAILABLE and refuses a timeout that is not a whole number of milliseconds', async () => {
    const port = await freePort();
    const refused = await failure(() => new ChromaStore({ host: '127.0.0.1', port, collection: 'coll', requestTimeoutMs: 1_000 }).describe());
    expect(refused.error.code).toBe(ErrorCode.UNAVAILABLE);
    expect(refused.error.message).not.toContain('request timeout');
    for (const requestTimeoutMs of [0, -1, 1.5, Number.NaN, 2 ** 31]) {
      expect(() => new ChromaStore({ host: '127.0.0.1', port, collection: 'coll', requestTimeoutMs })).toThrow(expect.objectContaining({ code: ErrorCode.INVALID_INPUT }));
    }
  });

  it('takes SHOAL_STORE_TIMEOUT_MS through the settings for chroma:// and qdrant:// indexes alike', async () => {
    const credentials = sinkCredentialsFromEnv({ SHOAL_STORE_TIMEOUT_MS: '300' });
    expect(credentials.storeTimeoutMs).toBe(300);
    for (const scheme of ['chroma', 'qdrant']) {
      const server = await hungServer();
      const { store: sink } = openIndexUri(`${scheme}://127.0.0.1:${server.port}/coll`, { credentials, retry: { baseDelayMs: 10, maxDelayMs: 20, maxElapsedMs: 500 } });
      const { error, ms } = await failure(() => sink.describe());
      expect(error.code, scheme).toBe(ErrorCode.UNAVAILABLE);
      expect(error.message, scheme).toMatch(scheme === 'chroma' ? /within the 300 ms request timeout/ : /no answer within the request timeout/);
      expect(ms, scheme).toBeLessThan(5_000);
      await sink.close();
    }
    expect(sinkCredentialsFromEnv({}).storeTimeoutMs).toBeUndefined();
    for (const bad of ['0', '-5', '1.5', 'soon', '99999999999']) {
      expect(() => sinkCredentialsFromEnv({ SHOAL_STORE_TIMEOUT_MS: bad }), bad).toThrow(expect.objectContaining({ code: ErrorCode.CONFIG_INVALID, message: expect.stringContaining('SHOAL_STORE_TIMEOUT_MS') }));
    }
  });
});
