import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { search } from '../../services/library/documents.js';
import { parsePack, projectWithPacked } from '../helpers/packed-project.js';
import { FIXTURES_DIR, REPO_ROOT } from '../helpers/shared.js';

/**
 * The package as a user gets it from a fresh clone: `git clone` of this checkout's HEAD (so no
 * dist/ exists), `npm pack` there, which must build dist/ itself (package.json `prepack`), the
 * tarball installed into an empty project, and docs/ingest.md's "Library use" example (ingest +
 * search) type-checked against the packed declarations and run with tsx on the fixture models.
 * Only committed files are in the clone: this tests HEAD, not uncommitted edits.
 * To avoid a full `npm install` (network, minutes) the clone's node_modules is a symlink to this
 * checkout's, and so are the empty project's dependencies (as library-package.test.ts does).
 */

const MODELS = join(FIXTURES_DIR, 'models');
const SUBSTITUTES: ReadonlyArray<[string, string]> = [
  ["'BAAI/bge-small-en-v1.5'", "'tiny-bert-mean'"],
  ["['./models']", JSON.stringify([MODELS])],
];
const TSC = join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const TSX = join(REPO_ROOT, 'node_modules', 'tsx', 'dist', 'cli.mjs');
const HARBOUR = 'Harbour notes.\n\nThe ferry to the island runs every hour. Tickets are sold on board.\n';

let work: string;
let project: string;
let packed: string[];

function run(command: string, args: readonly string[], cwd: string): { code: number | null; stdout: string; stderr: string } {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', env: { ...process.env, SHOAL_THREADS: '1' }, timeout: 120_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** The first ```ts block of docs/ingest.md's "Library use" section. */
function libraryExample(): string {
  const doc = readFileSync(join(REPO_ROOT, 'docs', 'ingest.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Library use'));
  const match = /```ts\n([\s\S]*?)```/.exec(section);
  if (match?.[1] === undefined) throw new Error('docs/ingest.md "Library use" has no ts block');
  return match[1];
}

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'shoal-clone-'));
  const clone = join(work, 'clone');
  const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: REPO_ROOT, encoding: 'utf8' }).trim();
  execFileSync('git', ['clone', '--quiet', '--no-checkout', REPO_ROOT, clone]);
  execFileSync('git', ['checkout', '--quiet', head], { cwd: clone });
  if (existsSync(join(clone, 'dist'))) throw new Error('a fresh clone must not hold dist/');
  symlinkSync(join(REPO_ROOT, 'node_modules'), join(clone, 'node_modules'));
  // No --ignore-scripts: prepack must build dist/.
  const output = execFileSync('npm', ['pack', '--json', '--pack-destination', work], { cwd: clone, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const pack = parsePack(output);
  packed = pack.files;
  project = projectWithPacked(work, pack.filename);
  let example = libraryExample();
  for (const [from, to] of SUBSTITUTES) {
    if (!example.includes(from)) throw new Error(`the docs/ingest.md example no longer contains ${from}`);
    example = example.replaceAll(from, to);
  }
  writeFileSync(join(project, 'example.ts'), example);
  mkdirSync(join(project, 'docs'));
  writeFileSync(join(project, 'docs', 'harbour.md'), HARBOUR);
  writeFileSync(
    join(project, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, types: ['node'], skipLibCheck: true }, include: ['example.ts'] }),
  );
}, 300_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

const Counts = z.strictObject({ total: z.number(), ok: z.number(), failed: z.number(), unchanged: z.number() });
const Hit = z.strictObject({ rank: z.number(), score: z.number(), id: z.string(), document_id: z.string(), source: z.string(), page: z.number(), text: z.string(), heading: z.string().nullable(), chunk: z.number(), start: z.number(), end: z.number(), metadata: z.record(z.string(), z.unknown()).nullable() });

describe('shoal packed from a fresh clone', () => {
  it('builds dist/ on npm pack (prepack) and ships ingest and search in the main entry', () => {
    for (const entry of ['dist/services/library/index.js', 'dist/services/library/index.d.ts', 'dist/services/library/documents.js', 'dist/services/library/documents.d.ts', 'dist/pipelines/documents/ingest-local.js']) {
      expect(packed, entry).toContain(entry);
    }
  });

  it("type-checks docs/ingest.md's Library use example against the packed declarations", () => {
    const checked = run(process.execPath, [TSC, '-p', join(project, 'tsconfig.json')], project);
    expect(checked.stdout + checked.stderr).toBe('');
    expect(checked.code).toBe(0);
  });

  it('runs the example from the installed package: ingests, reports progress, searches; a second run finds both documents unchanged', async () => {
    const first = run(process.execPath, [TSX, 'example.ts'], project);
    expect(first.code, first.stderr).toBe(0);
    const [counts, hitLine] = first.stdout.trim().split('\n');
    expect(Counts.parse(JSON.parse(counts ?? ''))).toEqual({ total: 2, ok: 2, failed: 0, unchanged: 0 });
    expect(first.stderr).toContain('2/2 documents');
    const hit = Hit.parse(JSON.parse(hitLine ?? ''));
    expect(hit.rank).toBe(1);
    // The same index searched by this checkout's code gives the same best hit.
    const engine = new InferenceEngine({ sources: { modelDirs: [MODELS], allowDownload: false }, runtime: { intraOpThreads: 1 } });
    try {
      const hits = await search(engine, { index: join(project, 'my-index'), query: 'when does the pilot boat leave?', k: 3 });
      expect(hits).toHaveLength(2);
      expect(hits[0]?.id).toBe(hit.id);
      expect(hits[0]?.score).toBeCloseTo(hit.score, 5);
      expect(hits.map((h) => h.source).sort()).toEqual([join(project, 'docs', 'harbour.md'), 'note-1'].sort());
    } finally {
      await engine.close();
    }
    const second = run(process.execPath, [TSX, 'example.ts'], project);
    expect(second.code, second.stderr).toBe(0);
    expect(Counts.parse(JSON.parse(second.stdout.trim().split('\n')[0] ?? ''))).toEqual({ total: 2, ok: 0, failed: 0, unchanged: 2 });
  }, 120_000);
});
