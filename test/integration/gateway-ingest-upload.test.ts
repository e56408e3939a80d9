import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startIngestGateway, type IngestGateway } from '../helpers/ingest-gateway.js';
import { makeDocx, makeEml, makeXlsx } from '../helpers/document-samples.js';
import { z } from 'zod';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import { IngestAccepted } from '../../adapters/protocol/http-responses.js';
import { MAX_DOCUMENT_BYTES } from '../../adapters/protocol/limits.js';
import { buildGatewayApp } from '../../services/gateway/app.js';
import { MAX_UPLOAD_FILES } from '../../services/gateway/ingest-upload.js';
import { ErrorBody, MemoryJobs, ScriptedEngine, TEST_SETTINGS } from '../helpers/gateway.js';
import { MemoryIngest } from '../helpers/memory-ingest.js';
import { natsServerAvailable, NATS_SERVER_MISSING } from '../helpers/nats-server.js';
import { TINY_MEAN, uniquePrefix } from '../helpers/nats-worker.js';
import { DATA_DIR, missingReason, sharedAvailable } from '../helpers/shared.js';

/**
 * POST /v1/ingest as multipart/form-data: files (a real PDF, a Markdown file) plus the JSON
 * fields, streamed to a temp folder, staged in the object store under their SHA-256 and ingested
 * by the same pipeline as `obj://` sources, named by their file names. Limits answer 413 (a file
 * over the document limit, too many files), 415 (a file of no kind the pipeline reads), 422 (an
 * empty file, a missing field, no file).
 */

const PDF = join(DATA_DIR, 'pdfs', '001-trivial__minimal-document.pdf');
const MARKDOWN = '# Harbour notes\n\nThe pilot boat leaves the harbour at dawn, before the ferries.\n';

type Part = { name: string; value: string } | { name: string; file: string; bytes: Uint8Array; type?: string };

/** A multipart body as a browser or curl -F sends it. */
async function form(parts: readonly Part[]): Promise<{ payload: Buffer; headers: Record<string, string> }> {
  const data = new FormData();
  for (const part of parts) {
    if ('value' in part) data.append(part.name, part.value);
    else data.append(part.name, new Blob([part.bytes], { type: part.type ?? 'application/octet-stream' }), part.file);
  }
  const encoded = new Response(data);
  return { payload: Buffer.from(await encoded.arrayBuffer()), headers: { 'content-type': encoded.headers.get('content-type') ?? '' } };
}

const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');
const errorOf = (body: string) => ErrorBody.parse(JSON.parse(body)).error;

describe.skipIf(!sharedAvailable(PDF))(`multipart uploads: what reaches the run, and the limits ${sharedAvailable(PDF) ? '' : missingReason(PDF)}`, () => {
  let app: FastifyInstance | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  async function gateway(ingest: MemoryIngest): Promise<FastifyInstance> {
    app = buildGatewayApp(
      { engine: ScriptedEngine.failing(ErrorCode.INTERNAL), jobs: new MemoryJobs(), ingest, models: async () => [], metrics: new ShoalMetrics({ processMetrics: false }), ready: async () => ({ ready: true }) },
      { ...TEST_SETTINGS, indexes: { docs: '/tmp/shoal-never-written' } },
    );
    await app.ready();
    return app;
  }

  it('stages each file under its SHA-256 and starts one run with them as named obj:// sources, beside the JSON fields', async () => {
    const ingest = new MemoryIngest();
    const gw = await gateway(ingest);
    const pdf = new Uint8Array(await readFile(PDF));
    const markdown = new TextEncoder().encode(MARKDOWN);
    const body = await form([
      { name: 'index', value: 'docs' },
      { name: 'model', value: TINY_MEAN },
      { name: 'force', value: 'true' },
      { name: 'sources', value: JSON.stringify([{ id: 'inline-1', text: 'An inline record beside the files.' }]) },
      { name: 'file', file: 'minimal.pdf', bytes: pdf, type: 'application/pdf' },
      // A folder part in the name is dropped: the source is named by the file name only.
      { name: 'file', file: '../../notes.md', bytes: markdown, type: 'text/markdown' },
    ]);
    const response = await gw.inject({ method: 'POST', url: '/v1/ingest', ...body });
    expect(response.statusCode, response.body).toBe(202);
    IngestAccepted.parse(response.json());
    expect(ingest.started).toHaveLength(1);
    const run = ingest.started[0];
    expect(run?.force).toBe(true);
    expect(run?.definition.stages.encode.model).toBe(TINY_MEAN);
    expect(run?.records).toEqual([
      { id: 'inline-1', text: 'An inline record beside the files.' },
      { id: 'minimal.pdf', ref: `obj://shoal_payloads/uploads/${sha256(pdf)}` },
      { id: 'notes.md', ref: `obj://shoal_payloads/uploads/${sha256(markdown)}` },
    ]);
    expect(sha256(ingest.staged.get(`uploads/${sha256(pdf)}`) ?? new Uint8Array())).toBe(sha256(pdf));
    expect(new TextDecoder().decode(ingest.staged.get(`uploads/${sha256(markdown)}`))).toBe(MARKDOWN);
  });

  it('413 for a file over the document limit and for too many files; 415 for a file of no supported kind; 422 for an empty file, no file, no index', async () => {
    const ingest = new MemoryIngest();
    const gw = await gateway(ingest);
    const index = { name: 'index', value: 'docs' };
    const post = async (parts: Part[]) => gw.inject({ method: 'POST', url: '/v1/ingest', ...(await form(parts)) });

    const large = await post([index, { name: 'file', file: 'large.txt', bytes: new Uint8Array(MAX_DOCUMENT_BYTES + 1).fill(0x61) }]);
    expect(large.statusCode, large.body).toBe(413);
    expect(errorOf(large.body)).toMatchObject({ code: 'INPUT_TOO_LARGE', details: { limitBytes: MAX_DOCUMENT_BYTES } });

    const many = await post([index, ...Array.from({ length: MAX_UPLOAD_FILES + 1 }, (_, i) => ({ name: 'file', file: `n${i}.txt`, bytes: new TextEncoder().encode(`note ${i}`) }))]);
    expect(many.statusCode, many.body).toBe(413);
    expect(errorOf(many.body)).toMatchObject({ code: 'INPUT_TOO_LARGE', details: { limit: MAX_UPLOAD_FILES } });

    const zip = await post([index, { name: 'file', file: 'archive.zip', bytes: new Uint8Array([0x50, 0x4b, 0x03, 0x04, 0x14, 0x00, 0x00, 0x00, 0x08, 0x00]) }]);
    expect(zip.statusCode, zip.body).toBe(415);
    expect(errorOf(zip.body)).toMatchObject({ code: 'UNSUPPORTED_MEDIA_TYPE', details: { file: 'archive.zip' } });

    const empty = await post([index, { name: 'file', file: 'empty.md', bytes: new Uint8Array(0) }]);
    expect(empty.statusCode, empty.body).toBe(422);
    expect(errorOf(empty.body).message).toContain('empty.md is empty');

    const none = await post([index]);
    expect(none.statusCode, none.body).toBe(422);
    expect(errorOf(none.body).message).toContain('has no file');

    const noIndex = await post([{ name: 'file', file: 'notes.md', bytes: new TextEncoder().encode(MARKDOWN) }]);
    expect(noIndex.statusCode, noIndex.body).toBe(422);
    expect(errorOf(noIndex.body).message).toContain('index');

    // Nothing was started, nor staged from a refused upload (only a file that passed its checks can be).
    expect(ingest.started).toHaveLength(0);
    expect(ingest.staged.size).toBe(0);
    // Multipart on any other route is still 415: the parser is the ingest route's alone.
    const other = await gw.inject({ method: 'POST', url: '/v1/search', ...(await form([index])) });
    expect(other.statusCode, other.body).toBe(415);
  }, 60_000);
});

const runnable = natsServerAvailable() && sharedAvailable(PDF);
describe.skipIf(!runnable)(`multipart uploads through the real pipeline ${runnable ? '' : natsServerAvailable() ? missingReason(PDF) : NATS_SERVER_MISSING}`, () => {
  let root: string;
  let gateway: IngestGateway | undefined;
  let app: FastifyInstance;
  const prefix = uniquePrefix('gwupload');

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'shoal-gw-upload-'));
    gateway = await startIngestGateway({ prefix, indexes: { up: join(root, 'index') } });
    app = gateway.app;
  }, 120_000);

  afterAll(async () => {
    await gateway?.close();
    await rm(root, { recursive: true, force: true });
  }, 60_000);

  it('a PDF and a Markdown file uploaded with ?wait=true are parsed, indexed and found by a search right after', async () => {
    const body = await form([
      { name: 'index', value: 'up' },
      { name: 'model', value: TINY_MEAN },
      { name: 'file', file: 'minimal.pdf', bytes: new Uint8Array(await readFile(PDF)), type: 'application/pdf' },
      { name: 'file', file: 'notes.md', bytes: new TextEncoder().encode(MARKDOWN), type: 'text/markdown' },
    ]);
    const response = await app.inject({ method: 'POST', url: '/v1/ingest?wait=true', ...body });
    expect(response.statusCode, response.body).toBe(200);
    const { status } = IngestAccepted.parse(response.json());
    expect(status, JSON.stringify(status.failed)).toMatchObject({ state: 'completed', documents: { total: 2, ok: 2, failed: 0 } });
    expect(status.chunks).toBeGreaterThanOrEqual(2);
    const search = await app.inject({ method: 'POST', url: '/v1/search', payload: { index: 'up', query: 'pilot boat leaves the harbour at dawn', k: 10 } });
    expect(search.statusCode, search.body).toBe(200);
    const hits = z.object({ hits: z.array(z.object({ source: z.string(), text: z.string() })) }).parse(search.json()).hits;
    expect(hits.find((hit) => hit.source === 'notes.md')?.text).toContain('The pilot boat leaves the harbour at dawn');
    expect(hits.some((hit) => hit.source === 'minimal.pdf' && hit.text.trim() !== '')).toBe(true);
  }, 120_000);

  it('a DOCX, an XLSX and an email uploaded under other names are told by their content, indexed with their headings and metadata, and found by the full-text mode', async () => {
    const docx = await makeDocx({ heading: 'Harbour rules', subheading: 'Moorings', paragraphs: ['Visiting yachts moor on the eastern pontoon.'] });
    const xlsx = await makeXlsx([{ name: 'Tides', rows: [['day', 'high water'], ['Monday', '06:40'], ['Tuesday', '07:25']] }]);
    const eml = makeEml({ subject: 'Dredging notice', from: 'harbour@example.org', to: 'crews@example.org', date: 'Mon, 2 Nov 2026 08:00:00 +0000', body: 'The channel is dredged on Thursday; keep clear of the buoys.' });
    const body = await form([
      { name: 'index', value: 'up' },
      { name: 'model', value: TINY_MEAN },
      // Names that say nothing of the format: the content decides.
      { name: 'file', file: 'rules.bin', bytes: docx },
      { name: 'file', file: 'tides.dat', bytes: xlsx },
      { name: 'file', file: 'notice.txt', bytes: eml },
    ]);
    const response = await app.inject({ method: 'POST', url: '/v1/ingest?wait=true', ...body });
    expect(response.statusCode, response.body).toBe(200);
    const { status } = IngestAccepted.parse(response.json());
    expect(status, JSON.stringify(status.failed)).toMatchObject({ state: 'completed', documents: { total: 3, ok: 3, failed: 0 } });
    const Hits = z.object({ hits: z.array(z.object({ source: z.string(), text: z.string(), heading: z.string().nullable(), metadata: z.record(z.string(), z.unknown()).nullable() })) });
    const find = async (query: string) => {
      const search = await app.inject({ method: 'POST', url: '/v1/search', payload: { index: 'up', query, k: 3, mode: 'text' } });
      expect(search.statusCode, search.body).toBe(200);
      return Hits.parse(search.json()).hits;
    };
    const [mooring] = await find('eastern pontoon');
    // One short chunk holds the whole document: it sits under the first heading.
    expect(mooring).toMatchObject({ source: 'rules.bin', heading: 'Harbour rules' });
    expect(mooring?.text).toContain('Visiting yachts moor on the eastern pontoon.');
    // Read by a parse worker over NATS, the automatic metadata is what a local parse gives: the bytes' size, the reader's title.
    expect(mooring?.metadata).toMatchObject({ mime: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document', size: docx.length, title: 'Harbour rules' });
    const [tides] = await find('Tuesday high water');
    expect(tides).toMatchObject({ source: 'tides.dat', heading: 'Tides' });
    expect(tides?.text).toContain('Tuesday\t07:25');
    const [notice] = await find('channel dredged buoys');
    expect(notice).toMatchObject({ source: 'notice.txt', heading: 'Dredging notice' });
    expect(notice?.metadata).toMatchObject({ title: 'Dredging notice', size: eml.length, mime: 'message/rfc822' });
  }, 120_000);
});
