import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/nats-server.js';
import { REPO_ROOT } from '../helpers/shared.js';

/**
 * The two scripts the images run, without a Docker engine (the image lane, test/images, runs
 * them in the image): deploy/docker/slim-node-modules.sh on a node_modules tree shaped like the
 * real one, and deploy/docker/healthcheck.mjs against processes whose command line names the
 * entry script, with a real HTTP server as the role's /readyz.
 */

const SLIM = join(REPO_ROOT, 'deploy', 'docker', 'slim-node-modules.sh');
const HEALTHCHECK = join(REPO_ROOT, 'deploy', 'docker', 'healthcheck.mjs');
const root = mkdtempSync(join(tmpdir(), 'shoal-image-files-'));
const children: ChildProcess[] = [];
const servers: Server[] = [];

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  rmSync(root, { recursive: true, force: true });
});

function files(base: string, paths: readonly string[]): void {
  for (const path of paths) {
    mkdirSync(dirname(join(base, path)), { recursive: true });
    writeFileSync(join(base, path), 'x');
  }
}

describe('deploy/docker/slim-node-modules.sh', () => {
  const platform = `${process.platform}/${process.arch}`;
  const ort = 'onnxruntime-node/bin/napi-v6';
  const tree = [
    `${ort}/${platform}/onnxruntime_binding.node`,
    `${ort}/${platform}/libonnxruntime.so.1`,
    `${ort}/${platform}/libonnxruntime_providers_cuda.so`,
    `${ort}/${platform}/libonnxruntime_providers_shared.so`,
    `${ort}/darwin/arm64/onnxruntime_binding.node`,
    `${ort}/win32/x64/onnxruntime_binding.node`,
    `${ort}/linux/${process.arch === 'arm64' ? 'x64' : 'arm64'}/onnxruntime_binding.node`,
    'onnxruntime-node/dist/index.js',
    'chromadb-js-bindings-linux-x64-gnu/chromadb.node',
    'chromadb/dist/chromadb.mjs',
    'onnxruntime-web/dist/ort.js',
    '@huggingface/transformers/dist/transformers.js',
    'openai/index.js',
    'typescript/lib/typescript.js',
    '@lancedb/lancedb/dist/index.js',
    '@lancedb/lancedb/dist/index.js.map',
    '@lancedb/lancedb/dist/index.d.ts',
    '@lancedb/lancedb/README.md',
    'sharp/lib/index.js',
  ];

  function slim(extra: readonly string[]): { kept: string[]; stdout: string } {
    const dir = mkdtempSync(join(root, 'modules-'));
    files(dir, tree);
    const run = spawnSync('sh', [SLIM, dir, ...extra], { encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    return { kept: tree.filter((path) => existsSync(join(dir, path))).sort(), stdout: run.stdout };
  }

  it('keeps this platform\'s onnxruntime binding and what Shoal loads; removes other platforms, the CUDA provider, unused packages, maps and declarations', () => {
    const { kept, stdout } = slim([]);
    expect(kept).toEqual(
      [
        `${ort}/${platform}/onnxruntime_binding.node`,
        `${ort}/${platform}/libonnxruntime.so.1`,
        `${ort}/${platform}/libonnxruntime_providers_shared.so`,
        'onnxruntime-node/dist/index.js',
        'chromadb/dist/chromadb.mjs',
        '@lancedb/lancedb/dist/index.js',
        'sharp/lib/index.js',
      ].sort(),
    );
    expect(stdout).toMatch(/^slim-node-modules: \d+ MB -> \d+ MB$/m);
  });

  it('--keep-cuda keeps the CUDA provider (the CUDA image)', () => {
    expect(slim(['--keep-cuda']).kept).toContain(`${ort}/${platform}/libonnxruntime_providers_cuda.so`);
  });

  it('fails when this platform\'s binding is missing', () => {
    const dir = mkdtempSync(join(root, 'modules-'));
    files(dir, [`${ort}/darwin/arm64/onnxruntime_binding.node`]);
    expect(spawnSync('sh', [SLIM, dir], { encoding: 'utf8' }).status).not.toBe(0);
  });
});

describe('deploy/docker/healthcheck.mjs', () => {
  /** A process whose command line reads like `node ENTRY ARGS...` for the health check to find. */
  function fakeRole(entry: string, args: readonly string[]): void {
    children.push(spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', entry, ...args], { stdio: 'ignore' }));
  }

  async function readyzServer(status: number): Promise<number> {
    const port = await freePort();
    const server = createServer((request, response) => {
      response.statusCode = request.url === '/readyz' ? status : 404;
      response.end();
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    return port;
  }

  async function check(entry: string, env: Record<string, string> = {}): Promise<{ code: number | null; stderr: string }> {
    // The fake role's command line is in /proc once it has started.
    await new Promise((resolve) => setTimeout(resolve, 300));
    // Asynchronously: the /readyz servers answer from this process's event loop.
    const child = spawn(process.execPath, [HEALTHCHECK], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, SHOAL_PORT: '', SHOAL_METRICS_PORT: '', ...env, SHOAL_HEALTHCHECK_ENTRY: entry } });
    const stderr: Buffer[] = [];
    child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    return { code, stderr: Buffer.concat(stderr).toString('utf8') };
  }

  const entry = (name: string): string => join(root, `${name}-${process.pid}`, 'shoal.js');

  it.skipIf(process.platform !== 'linux')('asks the gateway\'s /readyz on its --port: 0 when ready, 1 when not', async () => {
    const ready = await readyzServer(200);
    fakeRole(entry('gw-ready'), ['gateway', '--port', String(ready)]);
    expect(await check(entry('gw-ready'))).toEqual({ code: 0, stderr: '' });
    const notReady = await readyzServer(503);
    fakeRole(entry('gw-busy'), ['gateway', `--port=${notReady}`]);
    const busy = await check(entry('gw-busy'));
    expect(busy.code).toBe(1);
    expect(busy.stderr).toContain(`http://127.0.0.1:${notReady}/readyz: HTTP 503`);
  });

  it.skipIf(process.platform !== 'linux')('asks a worker\'s metrics port (flag or SHOAL_METRICS_PORT); a worker without one is healthy while it runs', async () => {
    const ready = await readyzServer(200);
    fakeRole(entry('worker-env'), ['worker', '--models', 'm']);
    expect((await check(entry('worker-env'), { SHOAL_METRICS_PORT: String(ready) })).code).toBe(0);
    const closed = await freePort();
    fakeRole(entry('worker-closed'), ['worker', '--metrics-port', String(closed), '--metrics-host', '0.0.0.0']);
    const refused = await check(entry('worker-closed'));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`http://127.0.0.1:${closed}/readyz`);
    fakeRole(entry('worker-plain'), ['worker', '--documents']);
    expect(await check(entry('worker-plain'))).toEqual({ code: 0, stderr: '' });
  });

  it.skipIf(process.platform !== 'linux')('fails when no process runs the entry script', async () => {
    const none = await check(entry('nobody'));
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('no process runs');
  });
});
