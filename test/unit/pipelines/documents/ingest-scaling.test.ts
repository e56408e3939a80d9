import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, sep } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, describe, expect, it } from 'vitest';
import type { ChunkRow, DocumentState } from '../../../../adapters/stores/store.js';
import { JsonlStore } from '../../../../adapters/stores/file/store.js';
import { chunkPages, type TokenCounter } from '../../../../pipelines/documents/chunk.js';
import type { ParsedPage } from '../../../../pipelines/documents/document.js';
import { pruneRemoved } from '../../../../pipelines/documents/prune.js';

/**
 * No superlinear step in the ingest path (issue 41): chunking, the file:// index's state lookups,
 * commits and pruning, timed at full size and at a tenth of it. Linear work takes ~10× as long;
 * the bound is 12×, 16× for pruning (see PRUNE_BOUND); a quadratic step takes ~100× (chunking
 * 8,000 pages took minutes). Each size is timed at its best of a few runs, after a warm-up, so
 * the shared machine's noise and the JIT do not decide. Inputs are built outside the timing, so
 * each step's own work is what is timed.
 */

const dir = await mkdtemp(join(tmpdir(), 'shoal-scaling-'));
afterAll(() => rm(dir, { recursive: true, force: true }));

/**
 * Words as tokens (spaces + 1, as `text.split(' ').length`): no model needed, and cheap, so the
 * chunker's own work dominates. Counted without splitting: an array of words per sentence was a
 * third of the chunking test's time, and garbage that made every collection dearer.
 */
const words: TokenCounter = async (texts) =>
  texts.map((text) => {
    let count = 1;
    for (let at = text.indexOf(' '); at !== -1; at = text.indexOf(' ', at + 1)) count += 1;
    return count;
  });

/** `count` pages of 25 sentences of 7 words, with a heading each: 25 chunks per page at size 8. */
function pages(count: number): ParsedPage[] {
  return Array.from({ length: count }, (_, p) => ({
    page: p + 1,
    ocr: false,
    text: Array.from({ length: 25 }, (_, s) => `Sentence ${s} of page ${p} says things.`).join(' '),
    headings: [{ offset: 0, text: `Part ${p}` }],
  }));
}

/**
 * A full garbage collection, run before each timed run: without it a run paid for collecting what
 * earlier runs (and the earlier tests of this file) left, which fell more on whichever run was
 * timed next. `gc` is taken from a fresh context made while --expose-gc is set, and the flag
 * is cleared again at once, so nothing else in the process sees it.
 */
setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;
setFlagsFromString('--no-expose-gc');

/** CPU milliseconds of the best of `runs` runs: CPU time, not wall time, so other processes on a shared machine count less. */
async function bestOf(runs: number, work: () => Promise<void>): Promise<number> {
  let best = Infinity;
  for (let run = 0; run < runs; run += 1) {
    collect();
    const started = process.cpuUsage();
    await work();
    const used = process.cpuUsage(started);
    best = Math.min(best, (used.user + used.system) / 1000);
  }
  return best;
}

/** Issue 41's bound: linear work is ~10×; quadratic is ~100×. */
const BOUND = 12;

/**
 * Pruning's bound. Pruning is nearly all hash-set work (a set of the 180,000 paths the run saw, a
 * lookup for each of the 200,000 indexed ones), and a set's operations cost more per entry as it
 * outgrows each cache: on the 2-core machine (1 MiB L2 a core) a lookup took 12 ns in a set of
 * 20,000 paths and 55 ns in one of 200,000, and building a set of 180,000 paths took 15× as long
 * as one of 18,000. So the linear prune measured 13–17× there (chunking and the file:// index
 * 7–11× in the same runs), and 12× cannot be met by a hash-based prune on that machine. 16×
 * still refuses a superlinear step: a quadratic dedup of the pruned paths measured 21–24×.
 */
const PRUNE_BOUND = 16;

/**
 * Times `work(size)` at `full` and at a tenth of it (after a warm-up of each), and returns the
 * ratio. A tenth-size run is timed as the mean of ten in a row whose outputs are all kept until
 * the clock stops: then both sides allocate as much and hold as much at the end. When each small
 * run's output died before the next, its garbage was collected almost for free, while the full
 * run's output (200,000 chunks, a 50,000-row index) outlived young-generation collections and was
 * copied into the old generation, on the full side only; with a single small run that put linear
 * steps at 12.7–15.8× on a loaded machine. A superlinear step still shows: quadratic work is ~100×
 * either way.
 */
async function ratio(full: number, work: (size: number) => Promise<unknown>, bound = BOUND): Promise<{ small: number; large: number; ratio: number }> {
  await work(full / 10);
  await work(full);
  // Up to five measurements, the first within the bound kept: one collection landing in the large
  // run put a linear step at 17.9× once on CI (pruning at 16.4× after three tries in another run,
  // its small side only 12 ms); a superlinear step (~100×) misses the bound every time.
  let best = { small: 0, large: 0, ratio: Infinity };
  for (let attempt = 0; attempt < 5 && best.ratio > bound; attempt += 1) {
    const small = (await bestOf(3, async () => {
      const outputs: unknown[] = [];
      for (let run = 0; run < 10; run += 1) outputs.push(await work(full / 10));
    })) / 10;
    const large = await bestOf(3, async () => {
      await work(full);
    });
    if (large / small < best.ratio) best = { small, large, ratio: large / small };
  }
  return best;
}

function row(source: string, chunk: number): ChunkRow {
  return { id: `${source}#${chunk}`, document_id: 'd', source, page: 1, chunk, text: 'text', start: 0, end: 4, heading: null, settings: 's', vector: new Float32Array([1, 0]), entities: null, labels: null, ingested_at: 'now' };
}

function state(source: string, chunks: number): DocumentState {
  return { source, document_id: 'd', settings: 's', chunks, pages: 1, ingested_at: 'now' };
}

/** An index whose states are in memory and whose remove deletes nothing: pruning's own work, timed without file I/O, and every run finds the same index. */
class MemoryStates extends JsonlStore {
  readonly #states: readonly DocumentState[];

  constructor(states: readonly DocumentState[]) {
    super({ dir });
    this.#states = states;
  }

  override async statesUnder(prefix: string): Promise<DocumentState[]> {
    return this.#states.filter((entry) => entry.source.startsWith(prefix));
  }

  override async remove(): Promise<void> {
    // Nothing is deleted on purpose (see above).
  }
}

describe('ingest scaling', () => {
  it('chunks 8,000 pages into 200,000 chunks in at most 12× the time of 800 pages', async () => {
    const inputs = new Map([800, 8_000].map((count) => [count, pages(count)]));
    let produced = 0;
    const timing = await ratio(8_000, async (count) => {
      const chunks = await chunkPages(inputs.get(count) ?? [], { size: 8, overlap: 0 }, words);
      produced = chunks.length;
      return chunks;
    });
    expect(produced).toBe(200_000);
    expect(timing.ratio, JSON.stringify(timing)).toBeLessThanOrEqual(BOUND);
  }, 120_000);

  it('the file:// index commits a 50,000-chunk document in at most 12× the time of a 5,000-chunk one', async () => {
    const rows = new Map([5_000, 50_000].map((count) => [count, Array.from({ length: count }, (_, i) => row('big.txt', i))]));
    let round = 0;
    const timing = await ratio(50_000, async (chunks) => {
      // A new table each time: every commit writes a new source's file, as the first ingest does.
      const sink = new JsonlStore({ dir, table: `rows${(round += 1)}` });
      await sink.prepare({ dimension: 2, distance: 'dot', optionalColumns: [], metadata: {} });
      await sink.commit(rows.get(chunks) ?? [], [state('big.txt', chunks)]);
      expect((await sink.states(['big.txt'])).get('big.txt')?.chunks).toBe(chunks);
      return sink;
    });
    expect(timing.ratio, JSON.stringify(timing)).toBeLessThanOrEqual(BOUND);
  }, 60_000);

  it('pruning 200,000 indexed documents takes at most 16× the time of 20,000', async () => {
    const root = join(dir, 'corpus');
    const sources = (count: number): string[] => Array.from({ length: count }, (_, i) => `${root}${sep}${i}.txt`);
    const indexes = new Map([20_000, 200_000].map((count) => [count, new MemoryStates(sources(count).map((source) => state(source, 1)))]));
    // The run saw all but the last tenth, and one document outside the root failed (built outside the timing).
    const seen = new Map([20_000, 200_000].map((count) => [count, sources(count).slice(0, count - count / 10)]));
    const failed = [{ source: join(dir, 'elsewhere.txt'), code: 'DOCUMENT_EMPTY', reason: 'empty' }];
    const timing = await ratio(200_000, async (count) => {
      const outcome = await pruneRemoved(indexes.get(count) ?? new MemoryStates([]), [{ given: root, prefix: `${root}${sep}` }], { seen: seen.get(count) ?? [], failed });
      expect(outcome.removed).toHaveLength(count / 10);
      return outcome;
    }, PRUNE_BOUND);
    expect(timing.ratio, JSON.stringify(timing)).toBeLessThanOrEqual(PRUNE_BOUND);
  }, 60_000);
});
