import { describe, expect, it } from 'vitest';
import { formatIndexDeleted, formatIndexDocuments, formatIndexTables, humanBytes } from '../../../../services/cli/commands/index-admin-text.js';

/** The readable text of `shoal index`: sizes in binary units with the exact bytes, names made printable, paging said. */

describe('shoal index text', () => {
  it('sizes: bytes below 1 KiB, else one decimal of the largest unit with the exact count', () => {
    expect(humanBytes(0)).toBe('0 bytes');
    expect(humanBytes(1023)).toBe('1023 bytes');
    expect(humanBytes(1536)).toBe('1.5 KiB (1536 bytes)');
    expect(humanBytes(5 * 1024 ** 3)).toBe('5.0 GiB (5368709120 bytes)');
  });

  it('a source with a newline or an escape sequence cannot forge a line or drive the terminal', () => {
    const text = formatIndexDocuments({
      index: '/srv/idx', table: 'chunks', total: 3, offset: 1, limit: 1, source_prefix: null, next_offset: 2,
      documents: [{ source: '/docs/a\nerror [INTERNAL]: x\u001b[2J.txt', document_id: 'h', chunks: 4, pages: 2, settings: 's', ingested_at: '2026-01-01T00:00:00Z' }],
    });
    expect(text.split('\n')).toEqual(['/docs/a\\nerror [INTERNAL]: x\\x1b[2J.txt  4 chunks, 2 pages, 2026-01-01T00:00:00Z', 'documents 2-2 of 3 (table chunks in /srv/idx); next page: --offset 2', '']);
    expect(formatIndexDeleted({ index: 'i', table: 't', source: 'a\rb', documents: 0, chunks: 2 })).toBe('deleted a\\rb: 2 chunks (it had no state: rows of an interrupted run) from table t in i\n');
    expect(formatIndexTables({ index: 'i', backend: 'chroma', tables: [] })).toBe('no tables in i (chroma)\n');
    expect(formatIndexTables({ index: 'i', backend: 'chroma', tables: [{ name: 'a', rows: 1 }, { name: 'longer', rows: 20 }] })).toBe('a       1 rows\nlonger  20 rows\n');
  });
});
