import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import { MAX_LIKE_PATTERN_CHARS, MAX_PREDICATES, matchesFilter, parseFilter } from '../../adapters/stores/shared/filter-tree.js';
import { JsonlStore } from '../../adapters/stores/file/store.js';
import { likeMatcher } from '../../adapters/stores/shared/like-pattern.js';
import type { ChunkRow, DocumentState } from '../../adapters/stores/store.js';

/**
 * Issue 42, item 3: LIKE in the in-process filter (file:// and s3:// indexes) ran as a regular
 * expression, and `source LIKE '%a%a%a%b'` on a 500-character source backtracked for 96 s on the
 * event loop. The matcher now works without backtracking (like-pattern.ts); the filter's LIKE
 * patterns and predicates are capped.
 */

const FULL = process.env.SHOAL_RELIABILITY_FULL === '1';

/** SQL LIKE by its definition, over code points: a table of "pattern[..j] matches value[..i]". */
function referenceLike(pattern: string, value: string): boolean {
  const tokens: ({ kind: 'any' } | { kind: 'one' } | { kind: 'char'; ch: string })[] = [];
  const chars = [...pattern];
  for (let at = 0; at < chars.length; at++) {
    const ch = chars[at] ?? '';
    if (ch === '\\' && at + 1 < chars.length) tokens.push({ kind: 'char', ch: chars[++at] ?? '' });
    else tokens.push(ch === '%' ? { kind: 'any' } : ch === '_' ? { kind: 'one' } : { kind: 'char', ch });
  }
  const text = [...value];
  // matches[j][i]: the first j tokens match the first i characters.
  const matches = Array.from({ length: tokens.length + 1 }, () => new Array<boolean>(text.length + 1).fill(false));
  const row0 = matches[0];
  if (row0 !== undefined) row0[0] = true;
  for (let j = 1; j <= tokens.length; j++) {
    const token = tokens[j - 1];
    const previous = matches[j - 1] ?? [];
    const current = matches[j] ?? [];
    for (let i = 0; i <= text.length; i++) {
      if (token?.kind === 'any') current[i] = (previous[i] ?? false) || (i > 0 && (current[i - 1] ?? false));
      else if (i > 0) current[i] = (previous[i - 1] ?? false) && (token?.kind === 'one' || (token?.kind === 'char' && token.ch === text[i - 1]));
    }
  }
  return matches[tokens.length]?.[text.length] ?? false;
}

const INGESTED_AT = '2026-01-01T00:00:00Z';

function row(source: string, index: number): ChunkRow {
  return {
    id: `${source.slice(-1)}${index}`, document_id: `doc-${source.slice(-1)}`, source, page: 1, chunk: index, text: `text ${index}`, start: 0, end: 6,
    heading: null, settings: 's', vector: [1, index / 1000], entities: null, labels: null, ingested_at: INGESTED_AT,
  };
}

function state(source: string, chunks: number): DocumentState {
  return { source, document_id: `doc-${source.slice(-1)}`, settings: 's', chunks, pages: 1, ingested_at: INGESTED_AT };
}

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('in-process LIKE without backtracking', () => {
  it("source LIKE '%a%a%a%b' on a 500-character source answers in milliseconds", () => {
    const tree = parseFilter("source LIKE '%a%a%a%b'");
    const started = performance.now();
    expect(matchesFilter(tree, { source: 'a'.repeat(500) })).toBe(false);
    expect(matchesFilter(tree, { source: `${'a'.repeat(500)}b` })).toBe(true);
    // Well under a millisecond alone; 50 ms leaves room for a loaded CI machine.
    expect(performance.now() - started).toBeLessThan(50);
  });

  it('the worst a 256-character pattern can do stays linear in the value: a `_` segment tried at every place of 10,000 characters', () => {
    const started = performance.now();
    expect(likeMatcher(`%${'a_'.repeat(127)}b%`)('a'.repeat(10_000))).toBe(false);
    // About 0.5 ms warm on an idle core (10,000 characters × 8 words of shift-and); the first call includes compiling it.
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('a file:// index counts and searches with that filter over 2,000 rows of 500 characters in well under a second', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'shoal-redos-'));
    dirs.push(dir);
    const sink = new JsonlStore({ dir });
    await sink.prepare({ dimension: 2, distance: 'cosine', optionalColumns: [], metadata: {} });
    // Two 500-character sources (one ending in b), 1,000 chunks each.
    const sources = [`${'a'.repeat(499)}b`, 'a'.repeat(500)];
    const rows = sources.flatMap((source) => Array.from({ length: 1_000 }, (_, i) => row(source, i)));
    await sink.commit(rows, sources.map((source) => state(source, 1_000)));
    const started = performance.now();
    expect(await sink.count("source LIKE '%a%a%a%b'")).toBe(1_000);
    const hits = await sink.search([1, 0], { k: 5, filter: "source NOT LIKE '%a%a%a%b' AND source LIKE 'a_a%'" });
    expect(hits).toHaveLength(5);
    expect(performance.now() - started).toBeLessThan(1_000);
    await sink.close();
  });

  it('agrees with the definition of LIKE on random patterns and values (code points, escapes, wildcards)', () => {
    // A small alphabet so that matches happen; an astral character and a lone surrogate to check `_` takes a code point.
    const alphabet = fc.constantFrom('a', 'b', '%', '_', '\\', '😀', 'é', '\uD83D');
    const text = (max: number): fc.Arbitrary<string> => fc.array(alphabet, { maxLength: max }).map((parts) => parts.join(''));
    fc.assert(
      fc.property(text(8), text(12), (pattern, value) => {
        expect(likeMatcher(pattern)(value), `${JSON.stringify(pattern)} LIKE ${JSON.stringify(value)}`).toBe(referenceLike(pattern, value));
      }),
      { numRuns: FULL ? 200_000 : 10_000 },
    );
  });

  it('agrees with the definition on long `_` segments too (the bit-parallel search across several 32-bit words)', () => {
    // Mostly `a` and `_` so that segments longer than 32 characters match somewhere in the value.
    const piece = fc.constantFrom('a', 'a', 'a', '_', '_', 'b', '%', '😀');
    const pattern = fc.array(piece, { minLength: 30, maxLength: 90 }).map((parts) => `%${parts.join('')}%`);
    const value = fc.array(fc.constantFrom('a', 'a', 'a', 'b', '😀'), { minLength: 40, maxLength: 160 }).map((parts) => parts.join(''));
    fc.assert(
      fc.property(pattern, value, (p, v) => {
        expect(likeMatcher(p)(v), `${JSON.stringify(p)} LIKE ${JSON.stringify(v)}`).toBe(referenceLike(p, v));
      }),
      { numRuns: FULL ? 50_000 : 3_000 },
    );
  });

  it('caps the LIKE pattern length and the number of predicates of one filter, for every backend', () => {
    const long = `source LIKE '${'%a'.repeat(MAX_LIKE_PATTERN_CHARS / 2)}%'`;
    expect(() => parseFilter(long)).toThrow(expect.objectContaining({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining(`LIKE patterns longer than ${MAX_LIKE_PATTERN_CHARS}`) }));
    const split = Array.from({ length: 3 }, () => `text LIKE '${'x'.repeat(100)}'`).join(' OR ');
    expect(() => parseFilter(split)).toThrow(expect.objectContaining({ code: ErrorCode.INVALID_INPUT }));
    expect(() => parseFilter(`source LIKE '${'%a'.repeat(MAX_LIKE_PATTERN_CHARS / 2 - 1)}%'`)).not.toThrow();
    const many = Array.from({ length: MAX_PREDICATES + 1 }, (_, i) => `page = ${i}`).join(' OR ');
    expect(() => parseFilter(many)).toThrow(expect.objectContaining({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining(`more than ${MAX_PREDICATES} predicates`) }));
    expect(() => parseFilter(Array.from({ length: MAX_PREDICATES }, (_, i) => `page = ${i}`).join(' OR '))).not.toThrow();
  });
});
