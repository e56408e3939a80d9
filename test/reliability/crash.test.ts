import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { NATS_SERVER_MISSING, eventually, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { testConnection, uniquePrefix } from '../helpers/nats-worker.js';
import { REPO_ROOT } from '../helpers/shared.js';

/**
 * Crash safety of submission: a submitter (the gateway's jobs client, in its own process) killed
 * with SIGKILL while publishing a 20,000-part job leaves a status marked `submitted: false`; the
 * job does not stay `queued`/`running` forever but ends visibly (`failed`, TIMEOUT, "submission
 * never completed") once the submit timeout has passed. Worker kills and broker restarts are
 * covered by test/integration/nats-reliability.test.ts.
 */

const SCRIPT = join(REPO_ROOT, 'test', 'reliability', 'scripts', 'submit-many-parts.ts');

describe.skipIf(!natsServerAvailable())(`a submitter killed mid-submit ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  const prefix = uniquePrefix('crash');

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await testConnection(server.url);
  });

  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  it('ends a job whose submitter was SIGKILLed part-way as failed, visibly, after the submit timeout', async () => {
    const jobs = await JobsClient.open(nc, { topology: { prefix }, submitTimeoutMs: 1_500 });
    const child = spawn(process.execPath, ['--import', 'tsx', SCRIPT, server.url, prefix, 'killed-mid-submit', 'nobody-serves-it', '20000'], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)));
    try {
      // Wait until some parts are out, then kill it without warning.
      await eventually(async () => {
        const info = await jobs.topology.jsm.streams.info(jobs.topology.names.jobsStream);
        expect(info.state.messages).toBeGreaterThan(200);
      }, 60_000);
      child.kill('SIGKILL');
      expect(await exited).toBe('SIGKILL');
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
    const published = (await jobs.topology.jsm.streams.info(jobs.topology.names.jobsStream)).state.messages;
    expect(published).toBeLessThan(20_000);
    const stored = await jobs.status('killed-mid-submit');
    expect(stored).toMatchObject({ parts: 20_000, submitted: false });
    const ended = await jobs.wait('killed-mid-submit', { timeoutMs: 15_000 });
    expect(ended).toMatchObject({ state: 'failed', submitted: false, parts_done: 0 });
    expect(ended.errors[0]?.code).toBe('TIMEOUT');
    expect(ended.errors[0]?.message).toMatch(/submission never completed/);
    console.info(`crash: submitter killed after ${published} of 20000 parts; job ended ${ended.state}: ${ended.errors[0]?.message}`);
  }, 120_000);
});
