import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { openSink } from '../../adapters/sinks/open.js';
import { FIXTURES_DIR } from '../helpers/shared.js';
import { parseJsonl, runShoal } from '../helpers/shoal-cli.js';

/**
 * `shoal encode` must not import what it never uses: the database clients behind `--index`
 * (LanceDB with apache-arrow, pg, chromadb, Qdrant's), the S3 SDK, pdfjs and fastify cost start-up
 * on every run (adapters/sinks/open.ts loads the backends on first use instead). Evidence: a
 * module-resolution hook (node:module register, preloaded through NODE_OPTIONS) records every
 * module the CLI's main thread resolves, during a real one-line encode.
 */

const scratch = mkdtempSync(join(tmpdir(), 'shoal-lazy-imports-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const RECORDER = `
import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(\`
import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(process.env.SHOAL_TEST_IMPORT_LOG, resolved.url + '\\\\n');
  return resolved;
}\`));
`;

/** Packages `shoal encode` must leave alone. */
const HEAVY = ['@lancedb/lancedb', 'apache-arrow', 'pg', 'pgvector', 'chromadb', '@qdrant/js-client-rest', '@aws-sdk/client-s3', 'pdfjs-dist', 'fastify', 'tesseract.js'];

/** Package names in resolved module URLs (`…/node_modules/@scope/name/…` → `@scope/name`). */
function packagesOf(urls: readonly string[]): Set<string> {
  const names = new Set<string>();
  for (const url of urls) {
    const match = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
    if (match?.[1] !== undefined) names.add(match[1]);
  }
  return names;
}

const Config = z.looseObject({ hidden_size: z.number().int() });
const DenseLine = z.strictObject({ id: z.number(), dense: z.array(z.number()) });

describe('shoal encode imports', () => {
  it('encodes a line without importing any index backend, the S3 SDK, pdfjs or fastify', async () => {
    const recorder = join(scratch, 'record-imports.mjs');
    const log = join(scratch, 'imports.log');
    writeFileSync(recorder, RECORDER);
    writeFileSync(log, '');
    const model = join(FIXTURES_DIR, 'models', 'tiny-bert-mean');
    const run = await runShoal(['encode', '--model', model, '--quiet'], {
      stdin: '{"id":1,"text":"lazy loading keeps start-up short"}\n',
      env: { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${recorder}`.trim(), SHOAL_TEST_IMPORT_LOG: log },
    });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const [line] = parseJsonl(run.stdout, DenseLine);
    const { hidden_size: dimension } = Config.parse(JSON.parse(readFileSync(join(model, 'config.json'), 'utf8')));
    expect(line?.dense).toHaveLength(dimension);
    expect(line?.dense.every(Number.isFinite)).toBe(true);

    const packages = packagesOf(readFileSync(log, 'utf8').split('\n'));
    // The recorder works: it saw what encode does need (the command parser, onnxruntime, zod).
    expect([...packages]).toEqual(expect.arrayContaining(['commander', 'onnxruntime-node', 'zod']));
    expect(HEAVY.filter((name) => packages.has(name))).toEqual([]);
  }, 60_000);

  it('opens a backend only on first use, and then it works', async () => {
    const dir = join(scratch, 'index');
    const opened = openSink(dir, { table: 'lazy' });
    expect(opened.backend).toBe('lancedb');
    // A table name the backend refuses is still refused at once, before any import.
    expect(() => openSink(dir, { table: 'bad name' })).toThrow(/table name/);
    expect(await opened.sink.describe()).toBeNull();
    await opened.sink.prepare({ dimension: 3, distance: 'cosine', optionalColumns: [], metadata: { model: 'lazy' } });
    expect(await opened.sink.describe()).toMatchObject({ dimension: 3, distance: 'cosine' });
    expect(await opened.sink.count()).toBe(0);
    await opened.sink.close();
    // A sink never used has nothing to close.
    await openSink('chroma://127.0.0.1:9/unused').sink.close();
  }, 60_000);
});
