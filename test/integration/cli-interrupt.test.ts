import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { natsServerAvailable, NATS_SERVER_MISSING } from '../helpers/nats-server.js';
import { CONFORMANCE_DIR, DATA_DIR, FIXTURES_DIR, REPO_ROOT, missingReason, sharedAvailable } from '../helpers/shared.js';
import { parseJsonl } from '../helpers/shoal-cli.js';
import { shoalInProcess } from '../helpers/shoal-in-process.js';
import { alive, startShoal } from '../helpers/shoal-process.js';

/**
 * Issue 16 item 7, with real child processes: `npx shoal dev &` then `kill $!` stops shoal dev and
 * its nats-server (the signal crosses npm, sh and bin/shoal.js); Ctrl-C or SIGTERM during
 * `shoal encode -o FILE` keeps the finished lines in FILE.partial, and `--resume` continues after
 * the last complete line: every input line exactly once, in order, with the vectors of an
 * uninterrupted run. The interrupted runs are child processes (signals); the others run the same
 * command tree in process, which saves seconds per run on the shared machine.
 */

const MODEL = join(FIXTURES_DIR, 'models', 'tiny-bert-mean');
const CORPUS = join(DATA_DIR, 'scifact', 'corpus.jsonl');
const LINES = 800;
const CHUNK = 16;
const work = mkdtempSync(join(tmpdir(), 'shoal-interrupt-'));

afterAll(() => rmSync(work, { recursive: true, force: true }));

const Encoded = z.strictObject({ id: z.string(), dense: z.array(z.number()), truncated: z.boolean().optional() });

function completeLines(path: string): number {
  if (!existsSync(path)) return 0;
  return readFileSync(path, 'utf8').split('\n').length - 1;
}

async function until(check: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

function descendants(pid: number): number[] {
  let children: number[] = [];
  try {
    children = execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' }).trim().split('\n').filter((s) => s !== '').map(Number);
  } catch {
    return [];
  }
  return children.flatMap((child) => [child, ...descendants(child)]);
}

describe.skipIf(!sharedAvailable(CORPUS))('Ctrl-C / SIGTERM during shoal encode -o FILE, then --resume', () => {
  if (!sharedAvailable(CORPUS)) it.skip(missingReason(CORPUS), () => undefined);

  it('keeps FILE.partial on SIGINT and SIGTERM; --resume finishes it identical to an uninterrupted run', async () => {
    const input = join(work, 'corpus.jsonl');
    writeFileSync(input, `${readFileSync(CORPUS, 'utf8').split('\n').slice(0, LINES).join('\n')}\n`);
    const expectedIds = readFileSync(input, 'utf8').split('\n').filter((l) => l !== '').map((l) => z.looseObject({ _id: z.string() }).parse(JSON.parse(l))._id);
    const args = ['encode', '--model', MODEL, '--id-field', '_id', '--max-length', '32', '--chunk-lines', String(CHUNK)];

    const reference = join(work, 'reference.jsonl');
    // --progress: the summary line is shown where the bars are (a terminal, or --progress).
    const full = await shoalInProcess([...args, '--progress', '-i', input, '-o', reference]);
    expect(full.code, full.stderr).toBe(0);
    expect(full.stderr).toMatch(/^encode: 800 lines \(\d[\d,]* truncated\) in \d+\.\d s, [\d,]+ tokens, [\d,]+ tokens\/s$/m);

    const out = join(work, 'vectors.jsonl');
    const partial = `${out}.partial`;
    // Run 1: interrupted by SIGINT (Ctrl-C) once some chunks are written.
    const first = startShoal([...args, '-i', input, '-o', out]);
    await until(() => completeLines(partial) >= CHUNK, 60_000, 'the first chunk in FILE.partial');
    const stopped1 = await first.stop('SIGINT');
    expect(stopped1.code, first.output()).toBe(130);
    expect(existsSync(out)).toBe(false);
    const kept1 = completeLines(partial);
    expect(kept1).toBeGreaterThanOrEqual(CHUNK);
    expect(kept1).toBeLessThan(LINES);
    expect(first.output()).toContain(`result lines written before it stopped are in ${partial}; run the same command with --resume`);
    // Every kept line is complete, and they are the first kept1 input lines in order.
    expect(parseJsonl(readFileSync(partial, 'utf8'), Encoded).map((l) => l.id)).toEqual(expectedIds.slice(0, kept1));

    // Without --resume the partial output is never overwritten silently.
    const refused = await shoalInProcess([...args, '-i', input, '-o', out]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('pass --resume to continue');
    expect(completeLines(partial)).toBe(kept1);

    // Run 2: --resume, interrupted by SIGTERM after it has added more; a half-written last line is cut off by run 3.
    const second = startShoal([...args, '-i', input, '-o', out, '--resume']);
    await until(() => completeLines(partial) >= kept1 + CHUNK, 60_000, 'more lines after the resume');
    const stopped2 = await second.stop('SIGTERM');
    expect(stopped2.code, second.output()).toBe(143);
    const kept2 = completeLines(partial);
    expect(kept2).toBeGreaterThan(kept1);
    writeFileSync(partial, '{"id":"half-writ', { flag: 'a' });

    // Run 3: --resume to the end.
    const third = await shoalInProcess([...args, '--progress', '-i', input, '-o', out, '--resume']);
    expect(third.code, third.stderr).toBe(0);
    expect(third.stderr).toContain(`encode: ${(LINES - kept2).toLocaleString('en-US')} lines after ${kept2.toLocaleString('en-US')} resumed`);
    expect(existsSync(partial)).toBe(false);
    const resumed = parseJsonl(readFileSync(out, 'utf8'), Encoded);
    const uninterrupted = parseJsonl(readFileSync(reference, 'utf8'), Encoded);
    expect(resumed.map((l) => l.id)).toEqual(expectedIds);
    expect(resumed.map((l) => l.truncated)).toEqual(uninterrupted.map((l) => l.truncated));
    // Vectors agree to float32 rounding: a resumed chunk may be batched with other neighbours, and
    // a different padded batch shape changes the last bits of onnxruntime's sums.
    let worst = 0;
    resumed.forEach((line, i) => line.dense.forEach((v, k) => (worst = Math.max(worst, Math.abs(v - (uninterrupted[i]?.dense[k] ?? Number.NaN))))));
    expect(worst).toBeLessThan(1e-5);
  }, 180_000);

  it('--resume refuses a partial output that belongs to another input', async () => {
    const input = join(work, 'other.jsonl');
    writeFileSync(input, '{"id":"a","text":"one"}\n{"id":"b","text":"two"}\n');
    const out = join(work, 'other-out.jsonl');
    writeFileSync(`${out}.partial`, '{"id":"zzz","dense":[1]}\n');
    const run = await shoalInProcess(['encode', '--model', MODEL, '-i', input, '-o', out, '--resume']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--resume: the partial output ends with id "zzz" but line 1');
    expect(run.stderr).not.toContain('run the same command with --resume');
  }, 60_000);
});

const MINILM = join(CONFORMANCE_DIR, 'bench-minilm-l6');

describe.skipIf(!sharedAvailable(CORPUS) || !sharedAvailable(MINILM))('Ctrl-C twice during shoal ingest', () => {
  if (!sharedAvailable(CORPUS) || !sharedAvailable(MINILM)) it.skip(missingReason(sharedAvailable(CORPUS) ? MINILM : CORPUS), () => undefined);

  it('the first Ctrl-C says the work in flight finishes first; the second stops at once by SIGINT (status 130), never an onnxruntime abort', async () => {
    // A real-size encoder (MiniLM, one thread): a wave of 256 chunks takes seconds, so the second
    // Ctrl-C lands while onnxruntime runs. process.exit used to abort there (status 134).
    const records = readFileSync(CORPUS, 'utf8').split('\n').slice(0, 400).filter((line) => line !== '')
      .map((line) => z.looseObject({ _id: z.string(), title: z.string(), text: z.string() }).parse(JSON.parse(line)))
      .map((doc) => `${JSON.stringify({ id: doc._id, text: `${doc.title}. ${doc.text}` })}\n`).join('');
    const run = startShoal(['ingest', '-', '--model', MINILM, '--index', join(work, 'ingest-twice'), '--progress']);
    run.child.stdin.end(records);
    // The bar counts chunks as documents are chunked; past 300 the first wave (256 chunks) is in
    // the model while the next one is read.
    await run.waitFor(/chunks ([3-9]\d\d|\d{4,})/, 120_000);
    run.child.kill('SIGINT');
    await run.waitFor(/stopping \(SIGINT\): finishing the work in flight; Ctrl-C again stops at once/, 10_000);
    // Past the 1 s window in which a repeat counts as the same Ctrl-C.
    await new Promise((resolve) => setTimeout(resolve, 1_300));
    expect(run.child.exitCode, 'the wave should still be encoding').toBeNull();
    run.child.kill('SIGINT');
    const exit = await run.exited();
    expect(run.output()).not.toContain('terminate called');
    // Died of the signal (a shell reports 130), not exit status 134 (abort).
    expect(exit, run.output().slice(-2000)).toEqual({ code: null, signal: 'SIGINT' });
  }, 180_000);
});

/** Whether a thread of `pid` waits in a FIFO's open for the other end (Linux's wait channel name). */
function waitsOnFifo(pid: number): boolean {
  try {
    return readdirSync(`/proc/${pid}/task`).some((task) => readFileSync(`/proc/${pid}/task/${task}/wchan`, 'utf8').includes('wait_for_partner'));
  } catch {
    return false;
  }
}

describe.skipIf(process.platform !== 'linux')('one SIGTERM stops a one-shot command stuck in a file-system call', () => {
  it('SHOAL_STOP_TIMEOUT_MS later it stops at once, by the signal, without a second one', async () => {
    // A named pipe nobody writes: opening it blocks a libuv thread for good, as a hung network
    // mount would, so the graceful stop can never finish on its own.
    const fifo = join(work, 'never-written');
    execFileSync('mkfifo', [fifo]);
    const run = startShoal(['encode', '--model', MODEL, '--input', fifo], { env: { SHOAL_STOP_TIMEOUT_MS: '1500' } });
    await until(() => waitsOnFifo(run.child.pid ?? -1), 60_000, 'the open of the named pipe');
    const sent = Date.now();
    run.child.kill('SIGTERM');
    const exit = await run.exited();
    const took = Date.now() - sent;
    expect(exit, run.output()).toEqual({ code: null, signal: 'SIGTERM' });
    expect(run.output()).toContain('stopping (SIGTERM): finishing the work in flight');
    expect(run.output()).toContain('the stop took over 1500 ms (SHOAL_STOP_TIMEOUT_MS): stopping at once');
    expect(took).toBeGreaterThanOrEqual(1_400);
    expect(took).toBeLessThan(15_000);
  }, 90_000);
});

describe.skipIf(!natsServerAvailable())('npx shoal dev & then kill $!', () => {
  if (!natsServerAvailable()) it.skip(NATS_SERVER_MISSING, () => undefined);

  const npxDev = (): ReturnType<typeof startShoal> =>
    startShoal(['shoal', 'dev', '--port', '0', '--models', 'tiny-bert-mean', '--results-dir', mkdtempSync(join(work, 'results-'))], {
      command: ['npx', '--no-install'],
      cwd: REPO_ROOT,
      env: { SHOAL_MODEL_DIR: join(FIXTURES_DIR, 'models') },
      // Its own process group, as a job started from a shell: the Ctrl-C test signals the whole group.
      detached: true,
    });

  it('Ctrl-C (SIGINT to the whole process group) still drains in order: the parents dying must not cut it short', async () => {
    const dev = npxDev();
    await dev.waitFor(/Press Ctrl-C to stop/, 90_000);
    const store = /store (\S+)\)/.exec(dev.output())?.[1] ?? '';
    expect(existsSync(store)).toBe(true);
    const tree = descendants(dev.child.pid ?? 0);
    process.kill(-(dev.child.pid ?? 0), 'SIGINT');
    await until(() => tree.every((pid) => !alive(pid)), 20_000, `every process under npx (${tree.join(', ')}) to exit`);
    expect(dev.output()).toContain('shoal dev: stopped');
    // The store is removed only at the end of an orderly stop (an immediate exit leaves it behind).
    expect(existsSync(store)).toBe(false);
  }, 120_000);

  it('kill $! stops shoal dev and its nats-server, through npx, sh and bin/shoal.js', async () => {
    const dev = npxDev();
    await dev.waitFor(/Press Ctrl-C to stop/, 90_000);
    const natsPid = Number(/nats-server pid (\d+)/.exec(dev.output())?.[1]);
    const npxPid = dev.child.pid ?? 0;
    const tree = descendants(npxPid);
    expect(tree).toContain(natsPid);
    expect(tree.length).toBeGreaterThanOrEqual(2);
    // What `kill $!` does: SIGTERM to npx (npm exec) alone.
    const stopped = await dev.stop('SIGTERM');
    expect(stopped.signal !== null || stopped.code !== null).toBe(true);
    await until(() => tree.every((pid) => !alive(pid)), 15_000, `every process under npx (${tree.join(', ')}) to exit`);
    expect(alive(natsPid)).toBe(false);
    expect(dev.output()).toContain('shoal dev: stopped');
  }, 120_000);
});
