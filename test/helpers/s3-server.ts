import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { S3SettingsInput } from '../../adapters/object-store/index.js';
import { freePort } from './nats-server.js';
import { waitForOutput } from './child-process.js';
import { restartableChild, type Restartable } from './restartable.js';

/**
 * A private s3rver (the S3-compatible test server, ../shared/PLATFORM.md) for one test file: a
 * free port, a temporary data folder, the given buckets created at start. `halt()` stops it
 * keeping its data, `start()` brings it back on the same port (an outage), `stop()` ends it and
 * removes the folder. Readiness is its own "listening" line, not a sleep. Started with `node`,
 * not npx, so the process killed is the server itself. s3rver accepts any secret for its access
 * key S3RVER (it checks the key id only).
 */

const S3RVER = fileURLToPath(new URL('../../node_modules/s3rver/bin/s3rver.js', import.meta.url));

export const S3RVER_CREDENTIALS = Object.freeze({ accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' });

export interface S3ServerHandle extends Restartable {
  readonly endpoint: string;
  readonly port: number;
  readonly dir: string;
  /** Settings for an S3Store on this server (fast retries, so tests of outages stay short). */
  settings(extra?: S3SettingsInput): S3SettingsInput;
  /** The variables a `shoal` process needs to reach this server. */
  env(): Record<string, string>;
}

export async function startS3Server(buckets: readonly string[]): Promise<S3ServerHandle> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'shoal-s3rver-'));
  const endpoint = `http://127.0.0.1:${port}`;
  let first = true;
  const server = restartableChild({
    launch: () => {
      // Buckets are configured on the first start only: a restart keeps what the folder holds.
      const configure = first ? buckets.flatMap((bucket) => ['--configure-bucket', bucket]) : [];
      first = false;
      // s3rver signs its listing continuation tokens with a cipher OpenSSL 3 keeps in its legacy provider.
      return spawn(process.execPath, ['--openssl-legacy-provider', S3RVER, '--address', '127.0.0.1', '--port', String(port), '--directory', dir, '--silent', ...configure], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    },
    ready: (child) => waitForOutput(child, 'listening on', 'stdout', `s3rver on port ${port}`),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  });
  await server.lifecycle.start();
  return {
    endpoint,
    port,
    dir,
    settings: (extra = {}) => ({ endpoint, region: 'us-east-1', credentials: { ...S3RVER_CREDENTIALS }, maxAttempts: 2, operationRetryMs: 20_000, connectTimeoutMs: 1_000, ...extra }),
    env: () => ({ AWS_ENDPOINT_URL_S3: endpoint, AWS_REGION: 'us-east-1', AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId, AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey }),
    ...server.lifecycle,
  };
}
