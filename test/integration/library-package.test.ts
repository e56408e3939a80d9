import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { readmeBlocks } from '../helpers/readme.js';
import { parsePack, projectWithPacked } from '../helpers/packed-project.js';
import { FIXTURES_DIR, REPO_ROOT } from '../helpers/shared.js';

/**
 * Shoal used as a library by someone else's project: the package is built (tsc, with
 * declarations) and packed with `npm pack` exactly as package.json's `files` and `exports` say,
 * the tarball is unpacked into an empty project's node_modules/shoal (its dependencies linked
 * from this checkout's node_modules: offline and without the npm cache), and the README's
 * TypeScript example is type-checked against the packed declarations and run with tsx, on the
 * fixture models instead of the hub ones. Its printed results must equal the in-process engine's.
 */

const MODELS = join(FIXTURES_DIR, 'models');
/** README model → fixture model of the same family. */
const SUBSTITUTES: ReadonlyArray<[string, string]> = [
  ["'BAAI/bge-small-en-v1.5'", "'tiny-bert-mean'"],
  ["'cross-encoder/ms-marco-MiniLM-L6-v2'", "'tiny-cross-encoder'"],
  ["'onnx-community/gliner_small-v2.1'", "'tiny-gliner'"],
  ["['./models']", JSON.stringify([MODELS])],
];
const TSC = join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const TSX = join(REPO_ROOT, 'node_modules', 'tsx', 'dist', 'cli.mjs');

let work: string;
let project: string;
let packed: string[];

function run(command: string, args: readonly string[], cwd: string): { code: number | null; out: string } {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', env: { ...process.env, SHOAL_THREADS: '1' }, timeout: 120_000 });
  return { code: result.status, out: `${result.stdout}${result.stderr}` };
}

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'shoal-package-'));
  const stage = join(work, 'stage');
  // The package as `npm run build` makes it (tsconfig.build.json), into a folder of its own so the
  // checkout's dist/ is neither needed nor touched.
  const build = run(process.execPath, [TSC, '-p', join(REPO_ROOT, 'tsconfig.build.json'), '--outDir', join(stage, 'dist')], REPO_ROOT);
  if (!existsSync(join(stage, 'dist', 'services', 'library', 'index.d.ts'))) throw new Error(`build failed:\n${build.out}`);
  for (const path of ['package.json', 'README.md', 'bin', 'native', 'scripts']) cpSync(join(REPO_ROOT, path), join(stage, path), { recursive: true });
  rmSync(join(stage, 'native', 'build'), { recursive: true, force: true });
  const output = execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', work], { cwd: stage, encoding: 'utf8' });
  const pack = parsePack(output);
  packed = pack.files;
  project = projectWithPacked(work, pack.filename);
  let example = readmeBlocks('ts').find((block) => block.includes("from 'shoal'")) ?? '';
  for (const [from, to] of SUBSTITUTES) {
    if (!example.includes(from)) throw new Error(`the README example no longer contains ${from}`);
    example = example.replaceAll(from, to);
  }
  writeFileSync(join(project, 'example.ts'), example);
  writeFileSync(
    join(project, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, types: ['node'], skipLibCheck: true }, include: ['example.ts', 'subpaths.ts'] }),
  );
}, 240_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('shoal as an npm package', () => {
  it('packs the built JS, its declarations and the CLI, and no sources or tests', () => {
    for (const entry of ['dist/services/library/index.js', 'dist/services/library/index.d.ts', 'dist/services/library/protocol.d.ts', 'dist/services/library/clients.d.ts', 'dist/adapters/model-threads/model-thread.js', 'bin/shoal.js', 'package.json']) {
      expect(packed, entry).toContain(entry);
    }
    expect(packed.filter((path) => path.startsWith('test/') || path.endsWith('.ts') && !path.endsWith('.d.ts'))).toEqual([]);
  });

  it('type-checks the README example against the packed declarations, including shoal/protocol and shoal/clients', () => {
    writeFileSync(
      join(project, 'subpaths.ts'),
      "import { ErrorCode, EncodeRequest } from 'shoal/protocol';\nimport { JobsClient, NatsEngine, connectNats } from 'shoal/clients';\n" +
        "const request: EncodeRequest = EncodeRequest.parse({ model: 'm', items: ['x'] });\nexport const names = [ErrorCode.MODEL_NOT_FOUND, request.model, typeof JobsClient.open, typeof NatsEngine, typeof connectNats];\n",
    );
    const checked = run(process.execPath, [TSC, '-p', join(project, 'tsconfig.json')], project);
    expect(checked.out).toBe('');
    expect(checked.code).toBe(0);
  });

  it('runs the README example from the installed package and prints what the in-process engine gives', async () => {
    const ran = run(process.execPath, [TSX, 'example.ts'], project);
    expect(ran.code, ran.out).toBe(0);
    const [dimensions, scores, entities] = ran.out.trim().split('\n');
    const engine = new InferenceEngine({ sources: { modelDirs: [MODELS], allowDownload: false }, runtime: { intraOpThreads: 1 } });
    try {
      const encoded = await engine.encode({ model: 'tiny-bert-mean', items: [{ id: 'q1', text: 'what is shoal?' }], role: 'query', output_types: ['dense'] });
      expect(Number(dimensions)).toBe(encoded.items[0]?.dense?.length);
      const ranked = await engine.score({ model: 'tiny-cross-encoder', query: 'q', items: ['a', 'b'] });
      const printed = z.array(z.object({ index: z.number(), score: z.number() })).parse(JSON.parse(scores ?? ''));
      expect(printed.map((s) => s.index)).toEqual(ranked.scores.map((s) => s.index));
      printed.forEach((s, i) => expect(s.score).toBeCloseTo(ranked.scores[i]?.score ?? Number.NaN, 6));
      const found = await engine.extract({ model: 'tiny-gliner', items: ['Ada Lovelace worked with Charles Babbage in London.'], labels: ['person', 'city'] });
      const printedEntities = z.array(z.object({ text: z.string(), label: z.string(), start: z.number(), end: z.number() })).parse(JSON.parse(entities ?? ''));
      expect(printedEntities.map((e) => [e.text, e.label, e.start, e.end])).toEqual((found.items[0]?.entities ?? []).map((e) => [e.text, e.label, e.start, e.end]));
    } finally {
      await engine.close();
    }
  }, 120_000);
});
