import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { Engine } from '../../adapters/protocol/engine.js';
import { ErrorBody, localGateway } from '../helpers/gateway.js';
import { startShoal, type ShoalProcess } from '../helpers/shoal-process.js';
import { REPO_ROOT } from '../helpers/shared.js';

/**
 * Issue 42 item 1. Before NATS was reached, the not-yet-connected backend threw UNAVAILABLE
 * synchronously inside the request's deadline wrapper, before its timer could be cleared: the
 * caller got its 503, and the timer's TIMEOUT rejected `request-timeout-ms` later with no one
 * listening, which ended the gateway process. Now the wrapper clears its timer whatever `work`
 * does, and every service main logs an unhandled rejection instead of exiting.
 */

const TIMEOUT_MS = 300;
let gateway: ShoalProcess | null = null;

afterEach(async () => {
  if (gateway !== null && gateway.child.exitCode === null && gateway.child.signalCode === null) await gateway.stop();
  gateway = null;
});

function stubEngine(encode: Engine['encode']): Engine {
  const refuse = (): never => {
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'not in this test');
  };
  return { encode, score: refuse, extract: refuse, tokenize: refuse, close: async () => undefined };
}

describe('gateway: failures before and around the engine never end the process', () => {
  it('a gateway not yet connected to NATS answers 503 to job calls and is still serving after the request timeout has passed', async () => {
    // Port 1: nothing listens, so the gateway stays in its "connecting" state for the whole test.
    gateway = startShoal(['gateway', '--nats', 'nats://127.0.0.1:1', '--port', '0', '--request-timeout-ms', String(TIMEOUT_MS)], { env: { SHOAL_LOG_LEVEL: 'info' } });
    // The log line comes once the port is open; the CLI's own line waits for NATS, which never answers.
    const listening = /"url":"(http:\/\/[^"]+)"[^\n]*"msg":"gateway listening"/;
    await gateway.waitFor(listening, 30_000);
    const url = listening.exec(gateway.output())?.[1];
    expect(url).toBeDefined();
    const calls = [
      fetch(`${url}/v1/jobs/abc`),
      fetch(`${url}/v1/jobs/abc/results`),
      fetch(`${url}/v1/jobs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ primitive: 'encode', request: { model: 'm', items: ['x'] } }) }),
    ];
    for (const response of await Promise.all(calls)) {
      expect(response.status).toBe(503);
      expect(ErrorBody.parse(await response.json()).error.code).toBe(ErrorCode.UNAVAILABLE);
      expect(response.headers.get('retry-after')).toBe('5');
    }
    // The process died TIMEOUT_MS after those answers; give it ten times that to do so.
    const outcome = await Promise.race([gateway.exited(), delay(TIMEOUT_MS * 10).then(() => 'still running' as const)]);
    expect(outcome, gateway.output().slice(-2000)).toBe('still running');
    const health = await fetch(`${url}/healthz`);
    expect(health.status).toBe(200);
    // Nothing was left to reject: not even the logged-and-ignored path was needed.
    expect(gateway.output()).not.toMatch(/unhandled promise rejection/);
  }, 45_000);

  it('an engine that throws synchronously or rejects with a non-Shoal error answers 500 INTERNAL, and leaves no timer behind', async () => {
    let calls = 0;
    const app = localGateway(
      stubEngine(() => {
        calls += 1;
        if (calls === 1) throw new TypeError('thrown before any promise');
        return Promise.reject(new RangeError('rejected by a bug'));
      }),
      { requestTimeoutMs: 50 },
    );
    try {
      for (let i = 0; i < 2; i++) {
        const response = await app.inject({ method: 'POST', url: '/v1/encode', payload: { model: 'tiny-bert-mean', items: ['a'] } });
        expect(response.statusCode).toBe(500);
        expect(ErrorBody.parse(response.json()).error.code).toBe(ErrorCode.INTERNAL);
      }
      // Past the request timeout: a timer left running would reject now, and vitest fails the run on it.
      await delay(200);
    } finally {
      await app.close();
    }
  });

  it('a service process logs an unhandled rejection with its message and stack, and keeps running', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'test', 'reliability', 'scripts', 'unhandled-rejection.ts')], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => child.once('exit', (exitCode) => resolve(exitCode)));
    expect(code, out).toBe(0);
    expect(out).toMatch(/still running/);
    const line = out.split('\n').find((l) => l.includes('unhandled promise rejection'));
    expect(line).toBeDefined();
    const logged: unknown = JSON.parse(line ?? '{}');
    expect(logged).toMatchObject({ level: 50, err: { message: 'probe rejection nobody handles' } });
    expect(JSON.stringify(logged)).toMatch(/unhandled-rejection\.ts/);
  }, 20_000);
});
