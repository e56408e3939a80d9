import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../../adapters/protocol/errors.js';
import { checkMetadata, metadataProblem, MAX_METADATA_BYTES } from '../../../../../adapters/protocol/metadata.js';
import { validateFilter } from '../../../../../adapters/stores/shared/filter.js';
import { lanceFilter } from '../../../../../adapters/stores/lancedb/filter.js';
import { namesMetadata } from '../../../../../adapters/stores/shared/filter-metadata.js';
import { filterToSql } from '../../../../../adapters/stores/pgvector/filter.js';
import { matchesFilter, parseFilter } from '../../../../../adapters/stores/shared/filter-tree.js';
import { readStoredMetadata } from '../../../../../adapters/stores/shared/row-metadata.js';
import { documentMetadata, mimeOf } from '../../../../../pipelines/documents/document-metadata.js';
import type { ParsedDocument } from '../../../../../pipelines/documents/document.js';
import { liftMetadataFields } from '../../../../../pipelines/documents/sources.js';

/** Issue 37 item 2: the bounds of document metadata, its filter grammar and the automatic file fields. */

describe('document metadata bounds', () => {
  it('takes flat scalars and lists of strings under identifier keys, and names what is wrong otherwise', () => {
    expect(checkMetadata({ title: 'T', year: 2020, score: 1.5, ok: false, none: null, tags: ['a', 'b'] }, 'x')).toEqual({ title: 'T', year: 2020, score: 1.5, ok: false, none: null, tags: ['a', 'b'] });
    const problems: [unknown, string][] = [
      [{ 'a-b': 1 }, 'metadata field "a-b" is not a name'],
      [{ '1st': 1 }, 'metadata field "1st" is not a name'],
      [{ ['k'.repeat(65)]: 1 }, 'is not a name'],
      [{ author: { name: 'A' } }, 'metadata field "author" is an object (metadata is flat)'],
      [{ tags: ['a', 2] }, 'metadata field "tags" is a list with a non-string item'],
      [{ n: Number.NaN }, 'metadata field "n" is a number that is not finite'],
      [{ tags: Array.from({ length: 257 }, () => 'x') }, 'a list of 257 items, over 256'],
      [Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, i])), 'metadata has 65 fields, over the limit of 64'],
      [{ note: 'n'.repeat(MAX_METADATA_BYTES) }, `over the limit of ${MAX_METADATA_BYTES}`],
      [['a'], 'metadata must be an object of fields, not a list'],
      ['text', 'metadata must be an object of fields, not a string'],
    ];
    for (const [value, message] of problems) expect(metadataProblem(value), JSON.stringify(value).slice(0, 60)).toContain(message);
    expect(() => checkMetadata({ 'a b': 1 }, 'stdin line 4')).toThrow(expect.objectContaining({ code: ErrorCode.INVALID_INPUT, message: expect.stringMatching(/^stdin line 4: metadata field "a b"/) }));
  });

  it('reads stored metadata back from any store form, and anything else as null', () => {
    expect(readStoredMetadata('{"a":1,"t":["x"]}')).toEqual({ a: 1, t: ['x'] });
    expect(readStoredMetadata({ a: 'b' })).toEqual({ a: 'b' });
    for (const value of [undefined, null, 'null', 'not json', '[1]', new Uint8Array([32, 0]), { 'bad key': 1 }]) expect(readStoredMetadata(value)).toBeNull();
  });
});

describe('metadata.<field> in filters', () => {
  it('parses metadata fields (quoted or not) beside stored columns, and refuses malformed ones and LIKE', () => {
    expect(parseFilter("metadata.year >= 2020 AND `metadata.tag` IN ('a', 'b')")).toEqual({
      kind: 'and',
      items: [{ kind: 'compare', column: 'metadata.year', op: '>=', value: 2020 }, { kind: 'in', column: 'metadata.tag', values: ['a', 'b'], negated: false }],
    });
    // The normalised text parses to the same tree (what each backend receives).
    const text = validateFilter("metadata.year >= 2020 AND source = 'a'");
    expect(text).toBe("`metadata.year` >= 2020 AND `source` = 'a'");
    expect(parseFilter(text)).toEqual(parseFilter("metadata.year >= 2020 AND source = 'a'"));
    expect(namesMetadata(text)).toBe(true);
    expect(namesMetadata(validateFilter("source = 'metadata.x'"))).toBe(false);
    const refused: [string, string][] = [
      ['metadata.bad-key = 1', 'unexpected "-"'],
      ['metadata.a.b = 1', 'unexpected "."'],
      ['metadata = 1', 'unknown column "metadata"'],
      ['metadatas.year = 1', 'unknown column "metadatas.year"'],
      ['metadata.1x = 1', 'unexpected'],
      ["metadata.title LIKE 'a%'", 'LIKE is for the stored text columns'],
      ['metadata.ok > true', 'true and false compare with = or <> only'],
    ];
    for (const [filter, message] of refused) expect(() => validateFilter(filter), filter).toThrow(expect.objectContaining({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining(message) }));
  });

  it('evaluates in process as shared/filter-metadata.ts defines: absent is unknown, another type is false, a list matches by holding', () => {
    const row = { source: 's', metadata: { year: 2020, when: '2020-05-01', tags: ['a', 'b'], flag: true, none: null } };
    const cases: [string, boolean][] = [
      ['metadata.year = 2020', true],
      ["metadata.year = '2020'", false],
      ["metadata.year <> '2020'", true],
      ["metadata.when > '2020-01-01' AND metadata.when < '2021'", true],
      ['metadata.when > 5', false],
      ["metadata.tags = 'b'", true],
      ["metadata.tags <> 'b'", false],
      ["metadata.tags IN ('z', 'a')", true],
      ["metadata.tags > 'a'", false],
      ['metadata.flag = true', true],
      ['metadata.missing = 1', false],
      ['NOT metadata.missing = 1', false],
      ['metadata.none IS NULL AND metadata.missing IS NULL AND metadata.year IS NOT NULL', true],
      ['NOT metadata.when >= 5', true],
    ];
    for (const [filter, want] of cases) expect(matchesFilter(parseFilter(filter), row), filter).toBe(want);
    expect(matchesFilter(parseFilter('metadata.year IS NULL'), { source: 's' })).toBe(true);
  });

  it('reaches LanceDB and PostgreSQL without user text in the SQL beyond escaped literals', () => {
    const lance = lanceFilter(validateFilter("metadata.title = 'O''Brien' AND page = 1"));
    expect(lance).toContain(`json_extract(\`metadata\`, '$.title') = '"O''Brien"'`);
    expect(lance).toContain('(`page` = 1)');
    const sql = filterToSql(parseFilter("metadata.title = 'x' OR metadata.year > 3"), 3);
    expect(sql.sql).not.toContain('title');
    expect(sql.params).toEqual(['title', 'x', 'x', 'year', 3]);
  });
});

describe('automatic file metadata', () => {
  const parsed = (type: ParsedDocument['type'], title?: string): ParsedDocument => ({ source: 'x', type, contentHash: 'h', pages: [], bytes: 1234, ...(title === undefined ? {} : { title }) });

  it('gives files title, mtime, size and mime, under the metadata their source came with; inline text none', () => {
    expect(documentMetadata({ uri: '/d/a.pdf', path: '/d/a.pdf', bytes: new Uint8Array(0), modified: '2025-01-02T03:04:05.000Z' }, parsed('pdf', ' A Title '))).toEqual({
      title: 'A Title', mtime: '2025-01-02T03:04:05.000Z', size: 1234, mime: 'application/pdf',
    });
    expect(documentMetadata({ uri: 'r1', path: 'notes.md', bytes: new Uint8Array(0), metadata: { title: 'Mine', year: 1 } }, parsed('markdown', 'Heading'))).toEqual({ title: 'Mine', year: 1, size: 1234, mime: 'text/markdown' });
    expect(documentMetadata({ uri: 'r2', text: 'hello' }, parsed('text'))).toBeUndefined();
    expect(documentMetadata({ uri: 'r3', text: 'hello', metadata: { a: 1 } }, parsed('text'))).toEqual({ a: 1 });
    expect((documentMetadata({ uri: '/d/b.pdf', bytes: new Uint8Array(0) }, parsed('pdf', 't'.repeat(2_000)))?.title as string).length).toBe(500);
    expect(() => documentMetadata({ uri: '/d/c.pdf', bytes: new Uint8Array(0), metadata: { note: 'n'.repeat(16_300) } }, parsed('pdf', 'x'.repeat(400)))).toThrow(expect.objectContaining({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('/d/c.pdf') }));
    expect([mimeOf('image', 'scan.TIFF'), mimeOf('html', 'a'), mimeOf('docx', 'a.docx'), mimeOf('unknown', 'a')]).toEqual(['image/tiff', 'text/html', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document', 'application/octet-stream']);
  });

  it('--metadata-fields lifts top-level fields into metadata and refuses a field given twice', () => {
    expect(liftMetadataFields({ id: 'a', text: 't', year: 2020, tag: 'x', other: 1 }, ['year', 'tag', 'absent'], 'line 1')).toEqual({ id: 'a', text: 't', other: 1, metadata: { year: 2020, tag: 'x' } });
    expect(liftMetadataFields({ id: 'a', text: 't', year: 2020, metadata: { b: 1 } }, ['year'], 'line 1')).toEqual({ id: 'a', text: 't', metadata: { b: 1, year: 2020 } });
    expect(liftMetadataFields({ id: 'a', text: 't', year: 2020, metadata: { year: 1 } }, ['year'], 'line 2')).toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('line 2: "year" is both') });
  });
});
