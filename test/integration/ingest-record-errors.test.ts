import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { FIXTURE_MODELS_DIR, TINY_MEAN } from '../helpers/nats-worker.js';
import { runShoal } from '../helpers/shoal-cli.js';

/**
 * Issue 37, inputs of `shoal ingest`: one bad stdin line no longer has to cost the run
 * (`--on-error skip` indexes the good records, lists each bad line with its number, code and
 * reason in `--rejects FILE`, counts them in the summary and exits 3; the default stays `fail`),
 * and the chunk size is a flag (`--chunk-size` / `--chunk-overlap`), part of the settings a
 * document's rows are made with, so changing it re-indexes instead of reading as unchanged.
 */

const env = { SHOAL_MODEL_DIR: FIXTURE_MODELS_DIR };
const Summary = z.looseObject({
  documents: z.object({ total: z.number(), ok: z.number(), failed: z.number(), unchanged: z.number() }),
  chunks: z.number(),
  rejected: z.number(),
  rejects_file: z.string().nullable(),
  chunk: z.object({ size: z.number(), overlap: z.number() }),
});
const Rejected = z.strictObject({ line: z.number(), code: z.string(), reason: z.string(), input: z.string(), truncated: z.boolean() });

const good = (from: number, count: number): string[] => Array.from({ length: count }, (_, i) => JSON.stringify({ id: `r${from + i}`, text: `Record ${from + i} is about boats and harbours.` }));
// 50 good records, a line that is not JSON (51), two more good ones, a duplicate id (54), a record of neither shape (55).
const INPUT = [...good(1, 50), '{"id": "r51", "text": "cut off', ...good(52, 2), JSON.stringify({ id: 'r1', text: 'again' }), JSON.stringify({ id: 'r55', body: 'no text field' })].join('\n');

describe('shoal ingest: --on-error for stdin records, --chunk-size / --chunk-overlap', () => {
  const dir = mkdtempSync(join(tmpdir(), 'shoal-ingest-inputs-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const base = (index: string): string[] => ['ingest', '-', '--index', join(dir, index), '--model', TINY_MEAN, '--json'];

  it('by default one bad line fails the run, naming it, and nothing is indexed', async () => {
    const run = await runShoal(base('strict'), { env, stdin: INPUT, cwd: dir });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('stdin line 51: not JSON');
    expect(existsSync(join(dir, 'strict'))).toBe(false);
  }, 60_000);

  it('--on-error skip indexes the 52 good records, lists the 3 bad lines in --rejects, counts them and exits 3', async () => {
    const rejects = join(dir, 'bad.jsonl');
    const run = await runShoal([...base('lenient'), '--on-error', 'skip', '--rejects', rejects], { env, stdin: INPUT, cwd: dir });
    expect(run.code, run.stderr).toBe(3);
    const summary = Summary.parse(JSON.parse(run.stdout));
    expect(summary.documents).toEqual({ total: 52, ok: 52, failed: 0, unchanged: 0 });
    expect(summary.rejected).toBe(3);
    expect(summary.rejects_file).toBe(rejects);
    expect(run.stderr).toContain('error [PARTIAL_FAILURE]: 3 stdin lines were rejected');
    const lines = readFileSync(rejects, 'utf8').trim().split('\n').map((line) => Rejected.parse(JSON.parse(line)));
    expect(lines.map((line) => [line.line, line.code])).toEqual([[51, 'INVALID_INPUT'], [54, 'INVALID_INPUT'], [55, 'INVALID_INPUT']]);
    expect(lines[0]?.reason).toBe('stdin line 51: not JSON');
    expect(lines[0]?.input).toBe('{"id": "r51", "text": "cut off');
    expect(lines[1]?.reason).toBe('stdin line 54: duplicate id "r1"');
    expect(lines[2]?.reason).toMatch(/^stdin line 55: expected \{"id","text"\} or \{"id","path"\}/);
    // The good records are in the index: the same input again finds all 52 unchanged.
    const again = await runShoal([...base('lenient'), '--on-error', 'skip', '--rejects', rejects], { env, stdin: INPUT, cwd: dir });
    expect(Summary.parse(JSON.parse(again.stdout)).documents).toEqual({ total: 52, ok: 0, failed: 0, unchanged: 52 });
    // The default file is ./shoal-rejects.jsonl; the text summary says how many and where.
    const text = await runShoal(['ingest', '-', '--index', join(dir, 'lenient'), '--model', TINY_MEAN, '--on-error', 'skip'], { env, stdin: INPUT, cwd: dir });
    expect(text.code).toBe(3);
    expect(text.stdout).toContain('rejected 3 stdin lines (--on-error skip), each with its line number and reason in shoal-rejects.jsonl');
    expect(readFileSync(join(dir, 'shoal-rejects.jsonl'), 'utf8').trim().split('\n')).toHaveLength(3);
  }, 90_000);

  it('--rejects without --on-error skip is refused', async () => {
    const run = await runShoal([...base('unused'), '--rejects', 'x.jsonl'], { env, stdin: INPUT, cwd: dir });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--rejects names the file of lines skipped by --on-error skip');
  }, 30_000);

  it('--chunk-size / --chunk-overlap set the chunking, a changed size re-indexes, and bad values are refused', async () => {
    const long = JSON.stringify({ id: 'long', text: Array.from({ length: 60 }, (_, i) => `Sentence number ${i} talks about the tide.`).join(' ') });
    // The fixture encoder takes 40 positions, so sizes above ~38 tokens are cut to its limit: 8 against 32.
    const small = await runShoal([...base('chunks'), '--chunk-size', '8', '--chunk-overlap', '0'], { env, stdin: long, cwd: dir });
    expect(small.code, small.stderr).toBe(0);
    const first = Summary.parse(JSON.parse(small.stdout));
    expect(first.chunk).toEqual({ size: 8, overlap: 0 });
    const large = await runShoal([...base('chunks'), '--chunk-size', '32'], { env, stdin: long, cwd: dir });
    const second = Summary.parse(JSON.parse(large.stdout));
    expect(second.chunk).toEqual({ size: 32, overlap: 8 });
    expect(second.documents).toMatchObject({ ok: 1, unchanged: 0 });
    expect(second.chunks).toBeLessThan(first.chunks);
    const same = await runShoal([...base('chunks'), '--chunk-size', '32'], { env, stdin: long, cwd: dir });
    expect(Summary.parse(JSON.parse(same.stdout)).documents).toMatchObject({ ok: 0, unchanged: 1 });
    const overlap = await runShoal([...base('chunks'), '--chunk-size', '16', '--chunk-overlap', '16'], { env, stdin: long, cwd: dir });
    expect(overlap.code).toBe(2);
    expect(overlap.stderr).toContain('--chunk-overlap 16 must be smaller than --chunk-size 16');
    const tiny = await runShoal([...base('chunks'), '--chunk-size', '4'], { env, stdin: long, cwd: dir });
    expect(tiny.code).toBe(2);
    expect(tiny.stderr).toContain('--chunk-size: must be a whole number from 8 to 8192');
  }, 90_000);
});
