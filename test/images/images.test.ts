import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DocumentJob, RunOpen } from '../../adapters/protocol/documents.js';
import { CONFORMANCE_DIR, REPO_ROOT } from '../helpers/shared.js';
import { jsonl, runShoal } from '../helpers/shoal-cli.js';
import { docker, dockerAvailable, dockerOk, DockerResources, health, publishedPort, runStreaming, waitFor } from './docker.js';

/**
 * The image lane (`SHOAL_IMAGE_TESTS=1 npm run test:images`, docs/deploy.md "Image lane"): builds
 * the images with scripts/images/build-images.sh (local base images where none can be pulled) and
 * checks the CPU image with real containers on a Docker network:
 *
 * - its size (≤ 700 MB) and contents: this platform's onnxruntime binding only, no CUDA provider,
 *   no TypeScript sources, no dev dependencies;
 * - it runs as uid 10001 with a read-only root filesystem, and encodes as the host does;
 * - `shoal worker` serves a job submitted from the host through nats-server in a container built
 *   from Debian's package; `shoal gateway` answers /readyz, /v1/encode and /v1/search on a
 *   read-only mounted index built by the host's `shoal ingest`; both HEALTHCHECKs turn healthy;
 * - `docker stop` drains a worker mid-job within the grace period, and a second worker finishes
 *   the job with every part done;
 * - `shoal worker --documents` ingests a mounted folder (file:// jobs) into a mounted index.
 *
 * Each check's time and result is collected and printed as a table at the end.
 */

const ENABLED = process.env.SHOAL_IMAGE_TESTS === '1';
const DOCKER = ENABLED ? await dockerAvailable() : false;
const SKIP_REASON = !ENABLED
  ? 'skipped: set SHOAL_IMAGE_TESTS=1 (builds the images and runs containers; needs a Docker engine, 5–15 min)'
  : !DOCKER
    ? 'skipped: no Docker engine answers `docker version` (start dockerd, docs/deploy.md "Image lane")'
    : '';
const IMAGE = process.env.SHOAL_IMAGE ?? 'shoal:cpu';
const NODE_VERSION = process.env.NODE_VERSION ?? '24.22.3';
const NATS_IMAGE = 'shoal-images/nats-server:bookworm';
const MAX_IMAGE_BYTES = 700 * 1000 * 1000;
const EMBED = 'bert-mean-embed';
const BENCH = 'bench-minilm-l6';
const UID = 10001;
const STOP_GRACE_S = 30;
const DOCS_DIR = join(REPO_ROOT, 'examples', 'docs');

interface Check {
  check: string;
  seconds: number;
  result: string;
}
const report: Check[] = [];
const started = new Map<string, number>();
function begin(check: string): void {
  started.set(check, Date.now());
}
function record(check: string, result: string): void {
  report.push({ check, seconds: (Date.now() - (started.get(check) ?? Date.now())) / 1000, result });
}

const Status = z.looseObject({ job_id: z.string(), state: z.string(), parts: z.number(), parts_done: z.number(), parts_failed: z.number(), items: z.number() });
const Hit = z.looseObject({ rank: z.number(), score: z.number(), source: z.string(), text: z.string() });

function cosine(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += (a[i] ?? 0) * (b[i] ?? 0);
    na += (a[i] ?? 0) ** 2;
    nb += (b[i] ?? 0) ** 2;
  }
  return dot / Math.sqrt(na * nb);
}

async function hostEncode(texts: readonly string[]): Promise<number[][]> {
  const run = await runShoal(['encode', '--model', EMBED], { env: { SHOAL_MODEL_DIR: CONFORMANCE_DIR }, stdin: jsonl(texts.map((text, i) => ({ id: String(i), text }))) });
  expect(run.code, run.stderr).toBe(0);
  return run.stdout
    .trim()
    .split('\n')
    .map((line) => z.object({ dense: z.array(z.number()) }).parse(JSON.parse(line)).dense);
}

describe.skipIf(SKIP_REASON !== '')(`images ${SKIP_REASON}`, () => {
  const resources = new DockerResources(`shoal-images-${process.pid}`);
  const work = mkdtempSync(join(tmpdir(), 'shoal-images-'));
  const indexDir = join(work, 'index');
  let network = '';
  let natsName = '';
  let natsHost = '';
  let workerName = '';
  let gatewayName = '';
  let gatewayUrl = '';
  let cudaLine = '';

  /** `docker run -d` of the Shoal image on the test network: read-only root, /tmp on tmpfs, the conformance models read-only. */
  async function runShoalContainer(role: string, args: readonly string[], options: { env?: Record<string, string>; volumes?: string[]; publish?: number[] } = {}): Promise<string> {
    const name = resources.container(role);
    const env = { NATS_URL: 'nats://nats:4222', SHOAL_MODEL_DIR: '/models', SHOAL_THREADS: '1', SHOAL_LOG_LEVEL: 'info', ...options.env };
    await dockerOk([
      'run', '-d', '--name', name, '--network', network, '--read-only', '--tmpfs', '/tmp',
      '-v', `${CONFORMANCE_DIR}:/models:ro`,
      ...(options.volumes ?? []).flatMap((v) => ['-v', v]),
      ...Object.entries(env).flatMap(([k, v]) => ['-e', `${k}=${v}`]),
      ...(options.publish ?? []).flatMap((p) => ['-p', `127.0.0.1::${p}`]),
      IMAGE, ...args,
    ]);
    return name;
  }

  async function waitHealthy(name: string, timeoutMs = 120_000): Promise<void> {
    await waitFor(`${name} to report healthy`, timeoutMs, async () => {
      const state = await health(name);
      if (state.status === 'unhealthy') throw new Error(`${name} is unhealthy: ${state.lastOutput}; logs: ${(await docker(['logs', '--tail', '20', name])).stderr}`);
      return state.status === 'healthy' ? true : undefined;
    }, 1000);
  }

  async function jobStatus(jobId: string): Promise<z.infer<typeof Status>> {
    const response = await fetch(`${gatewayUrl}/v1/jobs/${jobId}`);
    expect(response.status).toBe(200);
    return Status.parse(await response.json());
  }

  beforeAll(async () => {
    // ---- build (bases made when they cannot be pulled), then a nats-server image from Debian's package ----
    begin('build');
    const build = await runStreaming(join(REPO_ROOT, 'scripts', 'images', 'build-images.sh'), [], { ...process.env, SHOAL_IMAGE: IMAGE, NODE_VERSION }, REPO_ROOT);
    if (build.code !== 0) throw new Error(`scripts/images/build-images.sh exited ${build.code}`);
    const images = [...build.stdout.matchAll(/^image (\S+) (\d+) (\d+)$/gm)].map((m) => `${m[1]}: ${(Number(m[2]) / 1e6).toFixed(0)} MB, built in ${m[3]} s`);
    cudaLine = /^cuda-skipped (.*)$/m.exec(build.stdout)?.[1] ?? '';
    const bases = /^\[build-images\] bases ready in (\d+) s$/m.exec(build.stdout)?.[1] ?? '?';
    record('build', [`base images ready in ${bases} s`, ...images, cudaLine === '' ? '' : `CUDA image not built: ${cudaLine}`].filter((s) => s !== '').join('; '));

    begin('nats-server image and network');
    const natsDockerfile = `FROM node:${NODE_VERSION}-bookworm-slim\nRUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nats-server && rm -rf /var/lib/apt/lists/*\nUSER 10001:10001\nENTRYPOINT ["nats-server"]\n`;
    await dockerOk(['build', '-q', '-t', NATS_IMAGE, '-'], { input: natsDockerfile, timeoutMs: 600_000 });
    network = resources.network();
    await docker(['network', 'rm', network]);
    await dockerOk(['network', 'create', network]);
    natsName = resources.container('nats');
    await dockerOk(['run', '-d', '--name', natsName, '--network', network, '--network-alias', 'nats', '-p', '127.0.0.1::4222', '--tmpfs', '/tmp', NATS_IMAGE, '-js', '-sd', '/tmp/jetstream', '-m', '8222']);
    natsHost = await publishedPort(natsName, 4222);
    const version = await dockerOk(['run', '--rm', '--entrypoint', 'nats-server', NATS_IMAGE, '--version']);
    record('nats-server image and network', `${version} in a container on network ${network}`);

    // ---- an index built on the host, mounted read-only into the gateway ----
    begin('host ingest');
    const ingest = await runShoal(['ingest', DOCS_DIR, '--model', EMBED, '--index', indexDir, '--no-progress'], { env: { SHOAL_MODEL_DIR: CONFORMANCE_DIR } });
    expect(ingest.code, ingest.stderr).toBe(0);
    // LanceDB writes its files 0600: the image's uid 10001 reads an index another user built only
    // once it is made readable (docs/deploy.md "Image lane").
    chmodSync(work, 0o755);
    execFileSync('chmod', ['-R', 'a+rX', indexDir]);
    record('host ingest', `${`${ingest.stdout}${ingest.stderr}`.trim().split('\n').filter((l) => / documents: /.test(l)).at(-1) ?? ''}; chmod -R a+rX`);
  }, 45 * 60_000);

  afterAll(async () => {
    await resources.removeAll();
    rmSync(work, { recursive: true, force: true });
    const table = ['| check | seconds | result |', '| --- | ---: | --- |', ...report.map((r) => `| ${r.check} | ${r.seconds.toFixed(1)} | ${r.result.replace(/\|/g, '\\|')} |`)];
    process.stdout.write(`\nimage lane (${IMAGE}):\n${table.join('\n')}\n`);
  }, 120_000);

  it('the CPU image is at most 700 MB and holds only this platform\'s binaries, dist/ and production dependencies', async () => {
    begin('size and contents');
    const bytes = Number(await dockerOk(['image', 'inspect', '-f', '{{.Size}}', IMAGE]));
    expect(bytes).toBeLessThanOrEqual(MAX_IMAGE_BYTES);
    const script = [
      'cd /app',
      'echo "ort=$(ls node_modules/onnxruntime-node/bin/napi-v6 | tr "\\n" " ")/$(ls node_modules/onnxruntime-node/bin/napi-v6/linux | tr "\\n" " ")"',
      'echo "ortfiles=$(ls node_modules/onnxruntime-node/bin/napi-v6/linux/x64 | tr "\\n" " ")"',
      'echo "top=$(ls /app | tr "\\n" " ")"',
      'echo "ts=$(find /app/dist /app/bin -name "*.ts" | wc -l)"',
      'for p in vitest tsgo eslint typescript chromadb-js-bindings-linux-x64-gnu onnxruntime-web @huggingface/transformers sharp @lancedb/lancedb-linux-x64-gnu @img/sharp-linux-x64; do [ -e node_modules/$p ] && echo "has=$p"; done',
      'echo "sizes:"; du -sm /app/node_modules/* /app/node_modules/@* 2>/dev/null | sort -rn | head -12',
      'du -sm /app/node_modules /app/dist /usr/local/bin/node /usr/local/lib/node_modules/npm',
    ].join('; ');
    const out = await dockerOk(['run', '--rm', '--entrypoint', 'sh', IMAGE, '-c', script]);
    expect(out).toMatch(/^ort=linux \/x64 $/m);
    expect(out).toMatch(/^ortfiles=libonnxruntime\.so\.1 onnxruntime_binding\.node $/m);
    expect(out).toMatch(/^top=bin dist healthcheck\.mjs native node_modules package\.json $/m);
    expect(out).toMatch(/^ts=0$/m);
    const present = [...out.matchAll(/^has=(\S+)$/gm)].map((m) => m[1]);
    expect(present.sort()).toEqual(['@img/sharp-linux-x64', '@lancedb/lancedb-linux-x64-gnu', 'sharp']);
    process.stdout.write(`\n${IMAGE} ${(bytes / 1e6).toFixed(0)} MB; du -sm inside the image (MB):\n${out.slice(out.indexOf('sizes:') + 7)}\n`);
    record('size and contents', `${(bytes / 1e6).toFixed(0)} MB ≤ 700 MB; onnxruntime linux/x64 only, no CUDA provider, no sources, no dev dependencies`);
  });

  it('runs as uid 10001 on a read-only root filesystem and encodes as the host does', async () => {
    begin('non-root, read-only');
    const probe = "const fs=require('fs');let w='written';try{fs.writeFileSync('/app/x','')}catch(e){w=e.code}let t='no';try{fs.writeFileSync('/tmp/x','');t='yes'}catch{}console.log(JSON.stringify({uid:process.getuid(),gid:process.getgid(),app:w,tmp:t}))";
    const who = JSON.parse(await dockerOk(['run', '--rm', '--read-only', '--tmpfs', '/tmp', '--entrypoint', 'node', IMAGE, '-e', probe])) as Record<string, unknown>;
    expect(who).toEqual({ uid: UID, gid: UID, app: 'EROFS', tmp: 'yes' });
    const texts = ['The pilot boarded at the outer buoy.', 'Net mending on the quay before dawn.'];
    const run = await docker(['run', '--rm', '-i', '--read-only', '--tmpfs', '/tmp', '-v', `${CONFORMANCE_DIR}:/models:ro`, '-e', 'SHOAL_MODEL_DIR=/models', IMAGE, 'encode', '--model', EMBED], { input: jsonl(texts.map((text, i) => ({ id: String(i), text }))) });
    expect(run.code, run.stderr).toBe(0);
    const inImage = run.stdout.trim().split('\n').map((line) => z.object({ dense: z.array(z.number()) }).parse(JSON.parse(line)).dense);
    const onHost = await hostEncode(texts);
    expect(inImage).toHaveLength(2);
    for (const [i, vector] of inImage.entries()) {
      expect(vector).toHaveLength(onHost[i]?.length ?? -1);
      for (const [d, value] of vector.entries()) expect(Math.abs(value - (onHost[i]?.[d] ?? NaN))).toBeLessThan(1e-5);
    }
    record('non-root, read-only', `uid/gid ${UID}, /app not writable (EROFS), /tmp tmpfs; \`shoal encode\` = host vectors within 1e-5`);
  });

  it('shoal worker serves a job through nats-server in a container; its HEALTHCHECK turns healthy', async () => {
    begin('worker: job through NATS, healthy');
    workerName = await runShoalContainer('worker-a', ['worker', '--models', `${EMBED},${BENCH}`, '--metrics-port', '9464', '--metrics-host', '0.0.0.0', '--concurrency', '4', '--drain-timeout', '20000', '--worker-id', 'worker-a']);
    await waitHealthy(workerName);
    const healthySeconds = (Date.now() - (started.get('worker: job through NATS, healthy') ?? 0)) / 1000;
    const items = Array.from({ length: 40 }, (_, i) => ({ id: `t${i}`, text: `Harbour note ${i}: the tide turns at ${i % 12} o'clock.` }));
    const submit = await runShoal(['submit', 'encode', '--model', EMBED, '--nats', `nats://${natsHost}`, '--part-items', '8', '--wait', '--timeout', '120000'], { stdin: jsonl(items) });
    expect(submit.code, submit.stderr).toBe(0);
    const status = Status.parse(JSON.parse(submit.stdout.trim().split('\n').at(-1) ?? '{}'));
    expect(status).toMatchObject({ state: 'completed', parts: 5, parts_done: 5, parts_failed: 0, items: 40 });
    record('worker: job through NATS, healthy', `healthy after ${healthySeconds.toFixed(1)} s; 40 items in 5 parts completed (submitted from the host)`);
  }, 240_000);

  it('shoal gateway answers /readyz, /v1/encode and /v1/search on a mounted index; its HEALTHCHECK turns healthy', async () => {
    begin('gateway: readyz, encode, search');
    gatewayName = await runShoalContainer('gateway', ['gateway'], { env: { SHOAL_HOST: '0.0.0.0', SHOAL_INDEXES: 'docs=/index' }, volumes: [`${indexDir}:/index:ro`], publish: [8080] });
    gatewayUrl = `http://${await publishedPort(gatewayName, 8080)}`;
    await waitFor('gateway /readyz', 120_000, async () => ((await fetch(`${gatewayUrl}/readyz`)).status === 200 ? true : undefined));
    await waitHealthy(gatewayName);
    const texts = ['Where does the pilot leave the ship?'];
    const encoded = await fetch(`${gatewayUrl}/v1/encode`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: EMBED, items: texts.map((text) => ({ text })) }) });
    expect(encoded.status).toBe(200);
    const dense = z.object({ items: z.array(z.object({ dense: z.array(z.number()) })) }).parse(await encoded.json()).items[0]?.dense ?? [];
    const [host] = await hostEncode(texts);
    expect(cosine(dense, host ?? [])).toBeGreaterThan(0.99999);
    const query = 'pilot boat maintenance';
    const searched = await fetch(`${gatewayUrl}/v1/search`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query, index: 'docs', k: 3 }) });
    expect(searched.status, await searched.clone().text()).toBe(200);
    const hits = z.object({ hits: z.array(Hit) }).parse(await searched.json()).hits;
    const local = await runShoal(['search', query, '--index', indexDir, '--k', '3'], { env: { SHOAL_MODEL_DIR: CONFORMANCE_DIR } });
    expect(local.code, local.stderr).toBe(0);
    const localHits = local.stdout.trim().split('\n').map((line) => Hit.parse(JSON.parse(line)));
    expect(hits.map((h) => [h.source, h.text])).toEqual(localHits.map((h) => [h.source, h.text]));
    for (const [i, hit] of hits.entries()) expect(Math.abs(hit.score - (localHits[i]?.score ?? NaN))).toBeLessThan(1e-4);
    record('gateway: readyz, encode, search', `/readyz 200, healthy; /v1/encode = host vector (cosine > 0.99999); /v1/search top 3 = host \`shoal search\` (${hits[0]?.source.split('/').at(-1) ?? ''} first)`);
  }, 240_000);

  it('docker stop drains a worker mid-job within the grace period; a second worker finishes it, no part lost', async () => {
    begin('docker stop drains');
    const items = Array.from({ length: 1280 }, (_, i) => ({ id: `d${i}`, text: `Entry ${i} of the harbour master's log: ${'the pilot boat left the quay at dawn with nets, ropes and a spare engine; '.repeat(4)}` }));
    const submitted = await runShoal(['submit', 'encode', '--model', BENCH, '--nats', `nats://${natsHost}`, '--part-items', '16'], { stdin: jsonl(items) });
    expect(submitted.code, submitted.stderr).toBe(0);
    const jobId = z.object({ job_id: z.string(), parts: z.number() }).parse(JSON.parse(submitted.stdout.trim())).job_id;
    await waitFor('the first parts done', 120_000, async () => ((await jobStatus(jobId)).parts_done > 0 ? true : undefined), 250);
    const stopStart = Date.now();
    await dockerOk(['stop', '-t', String(STOP_GRACE_S), workerName], { timeoutMs: (STOP_GRACE_S + 30) * 1000 });
    const stopSeconds = (Date.now() - stopStart) / 1000;
    const atStop = await jobStatus(jobId);
    const exit = JSON.parse(await dockerOk(['inspect', '-f', '{{json .State}}', workerName])) as { ExitCode: number; OOMKilled: boolean };
    const logs = await docker(['logs', workerName]);
    // Exit 0 within the grace: the worker drained and ended itself (a SIGKILL at the grace would be 137).
    expect(exit.ExitCode, `${logs.stdout.slice(-2000)}${logs.stderr.slice(-2000)}`).toBe(0);
    expect(stopSeconds).toBeLessThan(STOP_GRACE_S);
    expect(atStop.parts_done).toBeLessThan(atStop.parts);
    expect(atStop.parts_failed).toBe(0);
    await runShoalContainer('worker-b', ['worker', '--models', `${EMBED},${BENCH}`, '--metrics-port', '9464', '--concurrency', '4', '--worker-id', 'worker-b']);
    const final = await waitFor('the job to finish on worker-b', 600_000, async () => {
      const status = await jobStatus(jobId);
      return status.state === 'running' || status.state === 'pending' ? undefined : status;
    }, 1000);
    expect(final).toMatchObject({ state: 'completed', parts: 80, parts_done: 80, parts_failed: 0, items: 1280 });
    record('docker stop drains', `stopped in ${stopSeconds.toFixed(1)} s (grace ${STOP_GRACE_S} s), exit 0, at ${atStop.parts_done}/${atStop.parts} parts; worker-b finished: ${final.parts_done}/${final.parts} parts done, 0 failed, ${final.items} items`);
  }, 900_000);

  it('shoal worker --documents ingests a mounted folder into a mounted index', async () => {
    begin('documents worker');
    const pipelines = join(work, 'pipelines');
    const out = join(work, 'documents-out');
    mkdirSync(pipelines);
    mkdirSync(out);
    chownSync(out, UID, UID);
    writeFileSync(join(pipelines, 'tiny.yaml'), `name: tiny\nstages:\n  encode:\n    model: ${EMBED}\n`);
    const name = await runShoalContainer('documents', ['worker', '--documents', '--pipelines', 'tiny', '--metrics-port', '9464'], {
      env: { SHOAL_PIPELINES: '/pipelines', SHOAL_INDEXES: 'docs=/out/index', SHOAL_FILE_ROOTS: '/docs' },
      volumes: [`${pipelines}:/pipelines:ro`, `${DOCS_DIR}:/docs:ro`, `${out}:/out`],
    });
    await waitHealthy(name);
    const files = ['pilot-boat-maintenance.md', 'velmora-pilotage.pdf', 'notice-14-dredging-scan.pdf', 'ostmund-fish-market.pdf'];
    const runId = `images-${randomUUID()}`;
    const nc = await connect({ servers: `nats://${natsHost}` });
    try {
      const js = jetstream(nc);
      for (const [i, file] of files.entries()) {
        const job = DocumentJob.parse({ v: 1, run_id: runId, doc: String(i), source: { uri: `file:///docs/${file}` }, pipeline: 'tiny', index: 'docs', submitted_at: new Date().toISOString() });
        await js.publish('shoal.documents.tiny', JSON.stringify(job), { msgID: `${runId}.${i}` });
      }
      await js.publish('shoal.runs.open', JSON.stringify(RunOpen.parse({ v: 1, run_id: runId, expected: files.length, pipeline: 'tiny', index: 'docs' })));
    } finally {
      await nc.close();
    }
    const watched = await runShoal(['runs', 'watch', runId, '--json', '--nats', `nats://${natsHost}`]);
    expect(watched.code, watched.stderr).toBe(0);
    const summary = z.looseObject({ state: z.string(), documents: z.unknown(), chunks: z.number(), pages: z.number() }).parse(JSON.parse(watched.stdout.trim()));
    expect(summary.state).toBe('completed');
    const search = await runShoal(['search', 'pilot boat maintenance', '--index', join(out, 'index'), '--k', '20'], { env: { SHOAL_MODEL_DIR: CONFORMANCE_DIR } });
    expect(search.code, search.stderr).toBe(0);
    const sources = new Set(search.stdout.trim().split('\n').map((line) => Hit.parse(JSON.parse(line)).source));
    expect([...sources].sort()).toEqual(files.map((f) => `/docs/${f}`).sort());
    record('documents worker', `4 file:// jobs from a read-only mounted folder: run completed, ${summary.pages} pages, ${summary.chunks} chunks in the mounted index (all 4 sources found by the host's \`shoal search\`)`);
  }, 600_000);
});
