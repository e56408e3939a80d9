import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { expectAllClose } from '../helpers/conformance.js';
import { jsonl, parseJsonl, runShoal } from '../helpers/shoal-cli.js';
import { png, quadrant } from '../helpers/tiny-image-model.js';
import { fixtureDir } from '../helpers/tiny-model.js';

/**
 * `{"id", "image": PATH}` lines in `shoal encode` and `shoal extract`, on the committed image
 * fixtures: image paths resolve from the working folder (always an image root), other folders
 * need --image-root, and a line must carry text or an image.
 */

const Id = z.union([z.string(), z.number()]);
const DenseLine = z.strictObject({ id: Id, dense: z.array(z.number()) });
const LabelsLine = z.strictObject({ id: Id, labels: z.array(z.strictObject({ label: z.string(), score: z.number() })) });

const CLIP = fixtureDir('tiny-clip');
const CLASSIFIER = fixtureDir('tiny-image-classifier');

let work: string;
let elsewhere: string;
let quadrants: Uint8Array;
beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'shoal-cli-images-'));
  elsewhere = join(work, '..', `${work.split('/').pop() ?? 'x'}-elsewhere`);
  mkdirSync(join(work, 'photos'));
  mkdirSync(elsewhere);
  quadrants = await png(32, 32, (x, y) => quadrant(x, y));
  writeFileSync(join(work, 'photos', 'quadrants.png'), quadrants);
  writeFileSync(join(work, 'photos', 'red.png'), await png(40, 30, () => [255, 0, 0]));
  writeFileSync(join(elsewhere, 'blue.png'), await png(40, 30, () => [0, 0, 255]));
});
afterAll(() => {
  rmSync(work, { recursive: true, force: true });
  rmSync(elsewhere, { recursive: true, force: true });
});

describe('shoal encode / extract with image lines', () => {
  it('encode: image and text lines through a CLIP model, paths relative to the working folder', async () => {
    const run = await runShoal(['encode', '--model', CLIP], { cwd: work, stdin: jsonl([{ id: 'img', image: 'photos/quadrants.png' }, { id: 'txt', text: 'a red cat' }]) });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const lines = parseJsonl(run.stdout, DenseLine);
    expect(lines.map((l) => l.id)).toEqual(['img', 'txt']);
    const engine = new InferenceEngine();
    try {
      const expected = await engine.encode({ model: CLIP, items: [{ image: quadrants }, 'a red cat'] });
      lines.forEach((line, i) => expectAllClose(line.dense, expected.items[i]?.dense ?? [], 1e-6, `line ${i}`));
    } finally {
      await engine.close();
    }
  });

  it('extract: an image classifier gives labels; folders outside the working folder need --image-root', async () => {
    const input = jsonl([{ id: 'r', image: 'photos/red.png' }, { id: 'b', image: join(elsewhere, 'blue.png') }]);
    const refused = await runShoal(['extract', '--model', CLASSIFIER], { cwd: work, stdin: input });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/^error \[INVALID_INPUT\]: .*blue\.png is outside the allowed image roots/);

    const run = await runShoal(['extract', '--model', CLASSIFIER, '--image-root', elsewhere], { cwd: work, stdin: input });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const lines = parseJsonl(run.stdout, LabelsLine);
    expect(lines.map((l) => [l.id, l.labels[0]?.label, l.labels.length])).toEqual([
      ['r', 'red', 5],
      ['b', 'blue', 5],
    ]);
  });

  it('an image that does not decode stops the run at its own line, after every line before it is written', async () => {
    writeFileSync(join(work, 'photos', 'garbage.png'), Buffer.from('not an image at all, only text bytes'));
    // Line 41 of a 64-line engine call: in the engine's second prep chunk (after the first 32 items).
    const lines = [...Array.from({ length: 40 }, (_, i) => ({ id: `g${i + 1}`, image: 'photos/red.png' })), { id: 'bad', image: 'photos/garbage.png' }, ...Array.from({ length: 23 }, (_, i) => ({ id: `h${i + 1}`, image: 'photos/red.png' }))];
    const run = await runShoal(['encode', '--model', CLIP, '--chunk-lines', '64'], { cwd: work, stdin: jsonl(lines) });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^error \[INVALID_INPUT\]: stdin line 41: not a supported image/);
    expect(parseJsonl(run.stdout, DenseLine).map((line) => line.id)).toEqual(lines.slice(0, 40).map((line) => line.id));
    // The same through extract, and into --out: the finished lines wait in FILE.partial for --resume.
    const out = join(work, 'labels.jsonl');
    const extract = await runShoal(['extract', '--model', CLASSIFIER, '--chunk-lines', '64', '--out', out], { cwd: work, stdin: jsonl(lines) });
    expect(extract.code).toBe(2);
    expect(extract.stderr).toMatch(/stdin line 41: not a supported image/);
    expect(parseJsonl(readFileSync(`${out}.partial`, 'utf8'), LabelsLine)).toHaveLength(40);
  });

  it('a line with both text and image (or neither) exits 2 naming the line', async () => {
    const run = await runShoal(['encode', '--model', CLIP], { cwd: work, stdin: jsonl([{ id: 1, text: 'ok' }, { id: 2, text: 'x', image: 'photos/red.png' }]) });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^error \[INVALID_INPUT\]: stdin line 2: text: a line needs "text" or "image" \(exactly one\)/);
  });
});
