import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { expectAllClose } from '../helpers/conformance.js';
import { NATS_SERVER_MISSING, freePort, natsServerAvailable } from '../helpers/nats-server.js';
import { readmeBlocks, readmeCommand, readmeLine, shoalArgs } from '../helpers/readme.js';
import { FIXTURES_DIR, REPO_ROOT } from '../helpers/shared.js';
import { SHOAL_BIN, jsonl, parseJsonl, runShoal } from '../helpers/shoal-cli.js';
import { png } from '../helpers/tiny-image-model.js';
import { CLI_FROM_SOURCE } from '../helpers/cli-build.js';

/**
 * A newcomer's first hour, scripted (issue 16): the README's offline quick start and its
 * documented examples run as child processes exactly as written (the commands are read from the
 * README), then the mistakes a new user makes — a mistyped model, a models directory that does
 * not exist, an image outside the allowed folders, GLiNER without labels, a port in use — each
 * checked for an answer that says what to do. The ingest/search quick start has its own test
 * (quick-start.test.ts); this one covers the rest.
 */

const MODELS = join(FIXTURES_DIR, 'models');
const OFFLINE = { SHOAL_MODEL_DIR: 'test/fixtures/models', HF_HUB_OFFLINE: '1' };
const Id = z.union([z.string(), z.number()]);
const OcrLine = z.strictObject({ id: Id, text: z.string(), lines: z.array(z.strictObject({ text: z.string(), score: z.number(), box: z.array(z.tuple([z.number(), z.number()])).length(4) })) });
const LabelsLine = z.strictObject({ id: Id, labels: z.array(z.strictObject({ label: z.string(), score: z.number() })) });

let work: string;
let reference: InferenceEngine;

/** A white page with `text` drawn in black (DejaVu Sans, as the OCR tests draw). */
async function textPage(text: string): Promise<Buffer> {
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="640" height="120"><rect width="100%" height="100%" fill="white"/><text x="30" y="75" font-family="DejaVu Sans, sans-serif" font-size="36" fill="black">${text}</text></svg>`;
  return sharp(Buffer.from(svg)).png().toBuffer();
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'shoal-first-hour-'));
  mkdirSync(join(work, 'scans'));
  writeFileSync(join(work, 'scans', 'page-1.png'), await textPage('Shoal reads text from images'));
  writeFileSync(join(work, 'scans', 'red.png'), await png(40, 30, () => [255, 0, 0]));
  reference = new InferenceEngine({ sources: { modelDirs: [MODELS], allowDownload: false }, runtime: { intraOpThreads: 1 } });
});
afterAll(async () => {
  await reference?.close();
  rmSync(work, { recursive: true, force: true });
});

describe("a newcomer's first hour on the command line (offline, fixture models)", () => {
  it('the README one-liner: echo a line | shoal encode --model tiny-bert-mean', async () => {
    const line = readmeLine("echo '{\"id\": 1, \"text\": \"hello world\"}' | SHOAL_MODEL_DIR=test/fixtures/models npx shoal encode");
    const input = /^echo '([^']*)'/.exec(line)?.[1] ?? '';
    const args = shoalArgs(line.slice(line.indexOf('| ') + 2));
    const run = await runShoal(args, { cwd: REPO_ROOT, env: OFFLINE, stdin: `${input}\n` });
    expect(run.code, run.stderr).toBe(0);
    const [out] = parseJsonl(run.stdout, z.strictObject({ id: Id, dense: z.array(z.number()) }));
    const expected = await reference.encode({ model: 'tiny-bert-mean', items: ['hello world'] });
    expect(out?.id).toBe(1);
    expectAllClose(out?.dense ?? [], expected.items[0]?.dense ?? [], 1e-5, 'hello world');
  });

  it('a mistyped model name is answered at once with the close names; a models directory that does not exist is warned about', async () => {
    const [mistyped, missing] = await Promise.all([
      runShoal(['encode', '--model', 'tiny-bert-maen'], { cwd: REPO_ROOT, env: { SHOAL_MODEL_DIR: 'test/fixtures/models', HF_ENDPOINT: 'http://127.0.0.1:9' }, stdin: '{"text": "x"}\n' }),
      runShoal(['encode', '--model', 'tiny-bert-mean'], { cwd: REPO_ROOT, env: { SHOAL_MODEL_DIR: 'test/fixtures/modelz', HF_ENDPOINT: 'http://127.0.0.1:9' }, stdin: '{"text": "x"}\n' }),
    ]);
    expect(mistyped.code).toBe(1);
    expect(mistyped.stderr).toMatch(/^error \[MODEL_NOT_FOUND\]: model tiny-bert-maen was not found in the models directories \(test\/fixtures\/models\); close names: tiny-bert-mean/);
    // Not sent to the hub (the endpoint here would refuse, after retries).
    expect(mistyped.stderr).not.toMatch(/127\.0\.0\.1:9|attempt/);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('warning: models directory test/fixtures/modelz (SHOAL_MODEL_DIR / --model-dir) does not exist');
    expect(missing.stderr).toMatch(/error \[MODEL_NOT_FOUND\]: model tiny-bert-mean was not found in the models directories \(test\/fixtures\/modelz\); models directory test\/fixtures\/modelz does not exist/);
    expect(missing.stderr).not.toMatch(/127\.0\.0\.1:9|attempt/);
  });

  it('shoal models list shows the models directory and the built-in OCR, with family and size', async () => {
    const run = await runShoal(['models', 'list', '--json'], { cwd: REPO_ROOT, env: OFFLINE });
    expect(run.code, run.stderr).toBe(0);
    const rows = parseJsonl(run.stdout, z.looseObject({ id: z.string(), family: z.string().nullable(), bytes: z.number().nullable(), source: z.string() }));
    const byId = new Map(rows.map((row) => [row.id, row]));
    const fixtures = readdirSync(MODELS).sort();
    expect(rows.filter((row) => row.source === 'models-dir').map((row) => row.id)).toEqual(fixtures);
    expect(byId.get('tiny-bert-mean')).toMatchObject({ family: 'dense', source: 'models-dir' });
    expect(byId.get('tiny-gliner')?.family).toBe('gliner');
    expect(byId.get('paddleocr/pp-ocrv4')).toMatchObject({ family: 'ocr', source: 'built-in' });
    expect(byId.get('paddleocr/pp-ocrv4')?.bytes ?? 0).toBeGreaterThan(10_000_000);
  });

  it('GLiNER without --labels names the flag; extract --help shows an OCR and an image-classification example', async () => {
    const [run, help] = await Promise.all([
      runShoal(['extract', '--model', 'tiny-gliner'], { cwd: REPO_ROOT, env: OFFLINE, stdin: '{"text": "Ada Lovelace in London"}\n' }),
      runShoal(['extract', '--help']),
    ]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^error \[INVALID_INPUT\]: .*zero-shot extractor.*--labels person,organization,city/);
    expect(help.stdout).toMatch(/shoal extract --model paddleocr\/pp-ocrv4/);
    expect(help.stdout).toMatch(/Image classification .*"labels"/);
  });

  it('images: the --input file\'s folder is allowed, OCR keeps text and lines with boxes, other folders name --image-root', async () => {
    const list = join(work, 'scans', 'list.jsonl');
    writeFileSync(list, jsonl([{ id: 'page1', image: join(work, 'scans', 'page-1.png') }]));
    // Run from the repository (the temp folder is outside it): only the folder of the input file makes the image readable.
    const red = jsonl([{ id: 'r', image: join(work, 'scans', 'red.png') }]);
    const classifier = join(MODELS, 'tiny-image-classifier');
    const [ocr, refused, allowed] = await Promise.all([
      runShoal(['extract', '--model', 'paddleocr/pp-ocrv4', '-i', list], { cwd: REPO_ROOT, env: OFFLINE }),
      runShoal(['extract', '--model', classifier], { cwd: REPO_ROOT, env: OFFLINE, stdin: red }),
      runShoal(['extract', '--model', classifier, '--image-root', join(work, 'scans')], { cwd: REPO_ROOT, env: OFFLINE, stdin: red }),
    ]);
    expect(ocr.code, ocr.stderr).toBe(0);
    const [page] = parseJsonl(ocr.stdout, OcrLine);
    expect(page?.id).toBe('page1');
    expect(page?.text).toMatch(/Shoal reads text/);
    expect(page?.lines.length).toBeGreaterThan(0);
    expect(page?.lines[0]?.box[1]?.[0] ?? 0).toBeGreaterThan(page?.lines[0]?.box[0]?.[0] ?? 0);

    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/outside the allowed image roots .*--image-root DIR .*SHOAL_IMAGE_ROOTS/);
    expect(allowed.code, allowed.stderr).toBe(0);
    expect(parseJsonl(allowed.stdout, LabelsLine)[0]?.labels[0]?.label).toBe('red');
  }, 60_000);

  it('a query pasted from a page (24,000 characters on the command line) is searched, not a segmentation fault', async () => {
    // onnxruntime's telemetry walked /proc/self/cmdline recursively and overflowed the model
    // thread's stack on a long argument (adapters/runtime/ort-environment.ts).
    const index = join(work, 'long-query-index');
    const ingest = await runShoal(['ingest', '-', '--model', 'tiny-bert-mean', '--index', index, '--no-progress'], {
      cwd: REPO_ROOT,
      env: OFFLINE,
      stdin: jsonl([{ id: 'n1', text: 'The pilot boat leaves at dawn.' }]),
    });
    expect(ingest.code, ingest.stderr).toBe(0);
    const query = 'when does the pilot boat leave the harbour? '.repeat(550);
    expect(query.length).toBeGreaterThan(24_000);
    const run = await runShoal(['search', query, '--index', index, '--k', '1'], { cwd: REPO_ROOT, env: OFFLINE });
    expect(run.signal, run.stderr).toBeNull();
    expect(run.code, run.stderr).toBe(0);
    const [hit] = parseJsonl(run.stdout, z.looseObject({ rank: z.number(), source: z.string(), text: z.string() }));
    expect(hit).toMatchObject({ rank: 1, source: 'n1', text: 'The pilot boat leaves at dawn.' });
  }, 60_000);

  it('a misspelt flag or command is one error line with the suggestion', async () => {
    const [flag, command] = await Promise.all([
      runShoal(['ingest', 'docs', '--modle', 'tiny-bert-mean'], { env: OFFLINE }),
      runShoal(['serach', 'pilot boat'], { env: OFFLINE }),
    ]);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toBe("error [INVALID_INPUT]: unknown option '--modle'; did you mean --model? (see --help)\n");
    expect(command.code).toBe(2);
    expect(command.stderr).toBe("error [INVALID_INPUT]: unknown command 'serach'; did you mean search? (see --help)\n");
  });

  it('a corpus line under other names on `shoal ingest -` (SciFact: _id, title, text) is answered with its fields and a jq command', async () => {
    const index = join(work, 'beir-index');
    const run = await runShoal(['ingest', '-', '--model', 'tiny-bert-mean', '--index', index], {
      cwd: REPO_ROOT,
      env: OFFLINE,
      stdin: jsonl([{ _id: '4983', title: 'Microstructural development', text: 'Alterations of the architecture of cerebral white matter.' }]),
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('error [INVALID_INPUT]: stdin line 1: expected {"id","text"} or {"id","path"}: got the fields "_id", "title", "text"; no "id"');
    expect(run.stderr).toContain(`jq -c '{id: ._id, text: (.title + ". " + .text)}'`);
  });

  it('a port in use names --port', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const address = blocker.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    try {
      const run = await runShoal(['gateway', '--port', String(port), '--nats', 'nats://127.0.0.1:9'], { env: OFFLINE });
      expect(run.code).not.toBe(0);
      expect(run.stderr).toMatch(new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port} \\(choose another with --port\\)`));
    } finally {
      blocker.close();
    }
  });
});

/** `curl -s localhost:8080PATH ... -d 'BODY'` examples of the README's quick start, as [path, body]. */
function readmeCurls(): Array<[string, unknown]> {
  const block = readmeBlocks('bash').find((text) => text.includes('curl -s localhost:8080')) ?? '';
  const joined = block.replace(/\\\n\s*/g, ' ');
  return [...joined.matchAll(/curl -s '?localhost:8080([^\s']+)'? .*?-d '([^']*)'/g)].map((match) => [match[1] ?? '', JSON.parse(match[2] ?? 'null') as unknown]);
}

describe.skipIf(!natsServerAvailable())(`shoal dev as the README runs it ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let child: ChildProcessWithoutNullStreams;
  let stdout = '';
  let stderr = '';
  let base = '';
  let models: string;

  beforeAll(async () => {
    // The fixture models plus one folder that looks like a model but cannot be used.
    models = join(work, 'models');
    mkdirSync(join(models, 'broken-model'), { recursive: true });
    writeFileSync(join(models, 'broken-model', 'config.json'), '{"this is": not json');
    for (const name of readdirSync(MODELS)) symlinkSync(join(MODELS, name), join(models, name));
    const port = await freePort();
    const args = readmeCommand('SHOAL_MODEL_DIR=test/fixtures/models npx shoal dev');
    child = spawn(process.execPath, [SHOAL_BIN, ...args, '--port', String(port), '--image-root', join(work, 'scans'), '--results-dir', join(work, 'results')], {
      cwd: work,
      env: { ...process.env, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, SHOAL_THREADS: '1', HF_HUB_OFFLINE: '1', SHOAL_MODEL_DIR: models },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        stdout += chunk.toString('utf8');
        if (stdout.includes('Press Ctrl-C to stop.')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`shoal dev exited with ${String(code)}:\n${stdout}\n${stderr}`)));
    });
    base = /HTTP\s+(http:\/\/\S+)/.exec(stdout)?.[1] ?? '';
  }, 90_000);

  afterAll(async () => {
    if (child !== undefined && child.exitCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGINT');
      await exited;
    }
  });

  it('serves the fixture models and the built-in OCR, skipping the unusable folder with a warning', () => {
    const served = /models\s+(.*)\n/.exec(stdout)?.[1] ?? '';
    expect(served).toContain('tiny-bert-mean (dense)');
    expect(served).toContain('paddleocr/pp-ocrv4 (ocr)');
    expect(served).not.toContain('broken-model');
    expect(stderr).toMatch(/skipping broken-model: it cannot be used/);
  });

  it("answers the README's curl examples", async () => {
    const curls = readmeCurls();
    expect(curls.map(([path]) => path)).toEqual(['/v1/encode', '/v1/score', '/v1/embeddings', '/v1/ingest?wait=true', '/v1/search']);
    const post = async (path: string, body: unknown): Promise<unknown> =>
      (await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })).json();
    const answers = await Promise.all(curls.slice(0, 3).map(async ([path, body]) => (await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })).json()));
    const encoded = z.looseObject({ items: z.array(z.looseObject({ index: z.number(), dense: z.array(z.number()) })) }).parse(answers[0]);
    const expected = await reference.encode({ model: 'tiny-bert-mean', items: ['a query', 'a document'] });
    encoded.items.forEach((item, i) => expectAllClose(item.dense, expected.items[i]?.dense ?? [], 1e-5, `encode ${i}`));
    const scored = z.looseObject({ scores: z.array(z.looseObject({ index: z.number(), score: z.number() })) }).parse(answers[1]);
    const ranked = await reference.score({ model: 'tiny-cross-encoder', query: 'q', items: ['first passage', 'second passage'] });
    expect(scored.scores.map((s) => s.index)).toEqual(ranked.scores.map((s) => s.index));
    const openai = z.looseObject({ data: z.array(z.looseObject({ embedding: z.array(z.number()) })) }).parse(answers[2]);
    expect(openai.data[0]?.embedding.length).toBe(expected.items[0]?.dense?.length);

    // Documents in, then search out, as written: the ingest waits for its run (?wait=true), so
    // the search right after it finds the text with no poll loop.
    const [ingestPath, ingestBody] = curls[3] ?? ['', {}];
    const ingested = z.looseObject({ status: z.looseObject({ state: z.string() }) }).parse(await post(ingestPath, ingestBody));
    expect(ingested.status.state).toBe('completed');
    const [searchPath, searchBody] = curls[4] ?? ['', {}];
    const found = z.looseObject({ hits: z.array(z.looseObject({ rank: z.number(), id: z.string(), text: z.string() })) }).parse(await post(searchPath, searchBody));
    expect(found.hits[0]?.text).toContain('The pilot boat leaves at dawn.');
  }, 90_000);

  it('an empty search query is one plain 422 message, as on the command line', async () => {
    for (const query of ['', '   ']) {
      const response = await fetch(`${base}/v1/search`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ index: 'default', query, k: 3 }) });
      expect(response.status).toBe(422);
      const body = z.object({ error: z.object({ code: z.string(), message: z.string() }) }).parse(await response.json());
      expect(body.error).toEqual({ code: 'INVALID_INPUT', message: 'invalid search request: query: the query is empty' });
    }
  });

  it('reads an image under --image-root with the built-in OCR, the same shape as on the command line', async () => {
    const response = await fetch(`${base}/v1/extract`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'paddleocr/pp-ocrv4', items: [{ id: 'page1', image: join(work, 'scans', 'page-1.png') }] }),
    });
    expect(response.status).toBe(200);
    const body = z.looseObject({ items: z.array(z.strictObject({ index: z.number(), id: Id, text: z.string(), lines: OcrLine.shape.lines })) }).parse(await response.json());
    expect(body.items[0]?.text).toMatch(/Shoal reads text/);
  }, 60_000);

  it('runs a job over HTTP and streams its results back', async () => {
    const submitted = await fetch(`${base}/v1/jobs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ primitive: 'encode', request: { model: 'tiny-bert-mean', items: ['a query', 'a document', 'a third'] }, part_items: 2 }),
    });
    const { job_id: jobId } = z.looseObject({ job_id: z.string() }).parse(await submitted.json());
    let state = '';
    for (let i = 0; i < 300 && !['completed', 'failed', 'partial'].includes(state); i++) {
      state = z.looseObject({ state: z.string() }).parse(await (await fetch(`${base}/v1/jobs/${jobId}`)).json()).state;
      if (state !== 'completed') await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(state).toBe('completed');
    const lines = (await (await fetch(`${base}/v1/jobs/${jobId}/results`)).text()).trim().split('\n');
    expect(lines.map((line) => z.looseObject({ index: z.number() }).parse(JSON.parse(line)).index)).toEqual([0, 1, 2]);
  });
});
