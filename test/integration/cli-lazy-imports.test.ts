import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { openIndexUri } from '../../adapters/stores/open.js';
import { FIXTURES_DIR, REPO_ROOT } from '../helpers/shared.js';
import { parseJsonl, runShoal, type ShoalRun } from '../helpers/shoal-cli.js';

/**
 * `shoal encode` must not import what it never uses: the database clients behind `--index`
 * (LanceDB with apache-arrow, pg, chromadb, Qdrant's), the S3 SDK, pdfjs and fastify cost start-up
 * on every run (adapters/stores/open.ts loads the backends on first use instead). Nor may
 * `shoal --version` load the NATS clients, pino or prom-client: the worker, submit, classify,
 * sink, dev and `ingest --nats` commands import them inside their actions. Evidence: a
 * module-resolution hook (node:module register, preloaded through NODE_OPTIONS) records every
 * module the CLI's main thread resolves, during a real run.
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

/** Packages only the NATS-facing commands (worker, submit, classify --nats, sink, dev, ingest --nats) need. */
const SERVICE_ONLY = ['@nats-io/transport-node', '@nats-io/jetstream', '@nats-io/kv', '@nats-io/obj', '@nats-io/nats-core', 'pino', 'prom-client'];

/** Package names in resolved module URLs (`…/node_modules/@scope/name/…` → `@scope/name`). */
function packagesOf(urls: readonly string[]): Set<string> {
  const names = new Set<string>();
  for (const url of urls) {
    const match = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
    if (match?.[1] !== undefined) names.add(match[1]);
  }
  return names;
}

/** The CLI's command files (services/cli/commands/NAME.js or .ts) among resolved module URLs, by NAME. */
function commandFilesOf(urls: readonly string[]): Set<string> {
  const names = new Set<string>();
  for (const url of urls) {
    const match = /\/services\/cli\/commands\/([a-z-]+)\.[jt]s$/.exec(url);
    if (match?.[1] !== undefined) names.add(match[1]);
  }
  return names;
}

/** Runs `shoal ARGS` with the recorder preloaded; returns the run, the packages and the command files its main thread resolved. */
async function recordImports(name: string, args: readonly string[], stdin = ''): Promise<{ run: ShoalRun; packages: Set<string>; commands: Set<string> }> {
  const recorder = join(scratch, 'record-imports.mjs');
  const log = join(scratch, `${name}.log`);
  writeFileSync(recorder, RECORDER);
  writeFileSync(log, '');
  const run = await runShoal(args, {
    stdin,
    env: { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${recorder}`.trim(), SHOAL_TEST_IMPORT_LOG: log },
  });
  const urls = readFileSync(log, 'utf8').split('\n');
  return { run, packages: packagesOf(urls), commands: commandFilesOf(urls) };
}

const Config = z.looseObject({ hidden_size: z.number().int() });
const DenseLine = z.strictObject({ id: z.number(), dense: z.array(z.number()) });

describe('shoal encode imports', () => {
  it('encodes a line without importing any index backend, the S3 SDK, pdfjs or fastify', async () => {
    const model = join(FIXTURES_DIR, 'models', 'tiny-bert-mean');
    const { run, packages, commands } = await recordImports('encode', ['--threads', '1', 'encode', '--model', model, '--quiet'], '{"id":1,"text":"lazy loading keeps start-up short"}\n');
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const [line] = parseJsonl(run.stdout, DenseLine);
    const { hidden_size: dimension } = Config.parse(JSON.parse(readFileSync(join(model, 'config.json'), 'utf8')));
    expect(line?.dense).toHaveLength(dimension);
    expect(line?.dense.every(Number.isFinite)).toBe(true);
    // The recorder works: it saw what encode does need (the command parser, onnxruntime, zod).
    expect([...packages]).toEqual(expect.arrayContaining(['commander', 'onnxruntime-node', 'zod']));
    expect(HEAVY.filter((name) => packages.has(name))).toEqual([]);
    expect(SERVICE_ONLY.filter((name) => packages.has(name))).toEqual([]);
    // Only the named command's file (services/cli/program.ts); a global option's value before it is skipped.
    expect([...commands]).toEqual(['encode']);
  }, 60_000);

  it('loads every command file for --help, which lists them all', async () => {
    const { run, commands } = await recordImports('help', ['--help']);
    expect(run.code).toBe(0);
    const ALL = ['encode', 'score', 'extract', 'tokenize', 'models', 'worker', 'submit', 'sink', 'gateway', 'dev', 'ingest', 'runs', 'search', 'index', 'pipelines', 'classify'];
    // A command's file is named after it, but for `index` (a file index.ts would read as a folder's public surface).
    const FILE_OF: Readonly<Record<string, string>> = { index: 'index-admin' };
    const section = run.stdout.split('\nCommands:\n')[1]?.split('\n\n')[0] ?? '';
    const listed = section.split('\n').map((line) => /^ {2}([a-z]+) /.exec(line)?.[1]).filter((name) => name !== undefined && name !== 'help');
    expect(listed).toEqual(ALL);
    expect(ALL.filter((name) => !commands.has(FILE_OF[name] ?? name))).toEqual([]);
  }, 60_000);

  it('prints --version without loading NATS, pino or prom-client', async () => {
    const { run, packages, commands } = await recordImports('version', ['--version']);
    const PackageJson = z.looseObject({ version: z.string() });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout.trim()).toBe(PackageJson.parse(JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8'))).version);
    // The recorder saw the command tree being built (commander, zod), so an empty list means something.
    expect([...packages]).toEqual(expect.arrayContaining(['commander', 'zod']));
    expect(SERVICE_ONLY.filter((name) => packages.has(name))).toEqual([]);
    expect(HEAVY.filter((name) => packages.has(name))).toEqual([]);
    expect([...commands]).toEqual([]);
  }, 60_000);

  it('opens a backend only on first use, and then it works', async () => {
    const dir = join(scratch, 'index');
    const opened = openIndexUri(dir, { table: 'lazy' });
    expect(opened.backend).toBe('lancedb');
    // A table name the backend refuses is still refused at once, before any import.
    expect(() => openIndexUri(dir, { table: 'bad name' })).toThrow(/table name/);
    expect(await opened.store.describe()).toBeNull();
    await opened.store.prepare({ dimension: 3, distance: 'cosine', optionalColumns: [], metadata: { model: 'lazy' } });
    expect(await opened.store.describe()).toMatchObject({ dimension: 3, distance: 'cosine' });
    expect(await opened.store.count()).toBe(0);
    await opened.store.close();
    // A sink never used has nothing to close.
    await openIndexUri('chroma://127.0.0.1:9/unused').store.close();
  }, 60_000);
});
