import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../../adapters/protocol/errors.js';
import { filterToSql } from '../../../../../adapters/stores/pgvector/filter.js';
import { toChromaWhere } from '../../../../../adapters/stores/chroma/filter.js';
import { toQdrantFilter } from '../../../../../adapters/stores/qdrant/filter.js';
import { matchesFilter, parseFilter } from '../../../../../adapters/stores/shared/filter-tree.js';
import { likeMatcher } from '../../../../../adapters/stores/shared/like-pattern.js';
import { validateFilter } from '../../../../../adapters/stores/shared/filter.js';

/** The `--filter` tree and its translations: SQL with parameters, Chroma's where, Qdrant's filter, in-process evaluation. */

const row = { id: 'x', source: "o'brien.txt", page: 3, chunk: 0, heading: null, text: 'Hello world', end: 40 };

describe('filter tree', () => {
  it('evaluates like SQL, nulls included', () => {
    const test = (filter: string): boolean => matchesFilter(parseFilter(validateFilter(filter)), row);
    expect(test("source = 'o''brien.txt' AND page BETWEEN 2 AND 3")).toBe(true);
    expect(test('page NOT BETWEEN 2 AND 3')).toBe(false);
    expect(test("text LIKE 'Hello%' AND text NOT LIKE '%x%'")).toBe(true);
    expect(test("text LIKE 'hello%'")).toBe(false);
    // LIKE's escape character is the backslash, as in PostgreSQL and LanceDB (file:// and S3 evaluate here).
    expect(likeMatcher('%x\\_y%')('C:\\x_y.txt')).toBe(true);
    expect(likeMatcher('%x\\_y%')('C:\\xzy.txt')).toBe(false);
    expect(likeMatcher('100\\%')('100%')).toBe(true);
    expect(likeMatcher('100\\%')('1000')).toBe(false);
    expect(likeMatcher('a\\\\b')('a\\b')).toBe(true);
    expect(test('heading IS NULL AND chunk IS NOT NULL')).toBe(true);
    // Comparing a null is unknown: neither it nor its negation matches.
    expect(test("heading = 'H'")).toBe(false);
    expect(test("NOT heading = 'H'")).toBe(false);
    expect(test("heading = 'H' OR page IN (1, 3)")).toBe(true);
    expect(test('page != 3 OR end >= 41')).toBe(false);
  });

  it('refuses malformed expressions with INVALID_INPUT', () => {
    for (const bad of ['page =', 'page 3', '(page = 1', 'page IN ()', "text LIKE 3", 'vector = 1', 'page NOT = 1']) {
      expect(() => parseFilter(bad), bad).toThrow(expect.objectContaining({ code: ErrorCode.INVALID_INPUT }));
    }
    expect(() => parseFilter(`${'('.repeat(100)}page = 1${')'.repeat(100)}`)).toThrow(/nested deeper/);
  });

  it('translates to parameterised SQL: user text only in the parameters', () => {
    const sql = filterToSql(parseFilter(validateFilter("source = 'x''; DROP TABLE t; --' OR page IN (1, 2)")), 3);
    expect(sql.sql).toBe('(("source" = $3) OR ("page" IN ($4, $5)))');
    expect(sql.params).toEqual(["x'; DROP TABLE t; --", 1, 2]);
  });

  it('pushes NOT down for Chroma and Qdrant (must_not on the leaves); refuses what a store lacks', () => {
    expect(toChromaWhere(parseFilter("NOT (source = 'a' OR page < 2)"))).toEqual({ $and: [{ source: { $ne: 'a' } }, { page: { $gte: 2 } }] });
    expect(toChromaWhere(parseFilter("source NOT IN ('a', 'b')"))).toEqual({ source: { $nin: ['a', 'b'] } });
    expect(() => toChromaWhere(parseFilter("source LIKE 'a%'")))
      .toThrow(expect.objectContaining({ code: ErrorCode.UNSUPPORTED_OPERATION }));
    expect(toQdrantFilter(parseFilter("NOT source = 'a' AND page >= 2"))).toEqual({
      must: [{ must_not: [{ key: 'source', match: { value: 'a' } }] }, { must: [{ key: 'page', range: { gte: 2 } }] }],
    });
    // A column that may be null: its negation leaves the null rows out, as SQL does (Chroma cannot say so: refused).
    expect(toQdrantFilter(parseFilter("NOT (heading = 'H' OR page < 2)"))).toEqual({
      must: [{ must_not: [{ key: 'heading', match: { value: 'H' } }, { is_null: { key: 'heading' } }] }, { must: [{ key: 'page', range: { gte: 2 } }] }],
    });
    expect(() => toChromaWhere(parseFilter("heading <> 'H'"))).toThrow(expect.objectContaining({ code: ErrorCode.UNSUPPORTED_OPERATION }));
    expect(toChromaWhere(parseFilter("heading = 'H'"))).toEqual({ heading: { $eq: 'H' } });
    expect(() => toQdrantFilter(parseFilter("source LIKE 'a%'"))).toThrow(expect.objectContaining({ code: ErrorCode.UNSUPPORTED_OPERATION }));
  });
});
