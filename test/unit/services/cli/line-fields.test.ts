import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { lineFieldMapper, looksLikeId, parseTemplate } from '../../../../services/cli/line-fields.js';
import { formatDuration, groupDigits, InputEta, summaryLine } from '../../../../services/cli/progress.js';

/**
 * The pure parts of issue 16's line options and progress: template parsing, the id-like field
 * names that trigger the --id-field hint, the mapping of one line, the input bar's ETA (no
 * "ETA 0s" before a rate is known) and the closing summary line of an encode run.
 */

describe('--template', () => {
  it('splits literals and fields, with {{ and }} for literal braces and dotted paths', () => {
    expect(parseTemplate('{title}. {text}')).toEqual([{ field: ['title'] }, { literal: '. ' }, { field: ['text'] }]);
    expect(parseTemplate('{{x}} {meta.title}')).toEqual([{ literal: '{x} ' }, { field: ['meta', 'title'] }]);
  });

  it('refuses templates without fields and unbalanced braces, naming --template', () => {
    for (const bad of ['plain text', '{title', 'a } b {text}', '{}']) {
      expect(() => parseTemplate(bad)).toThrow(expect.objectContaining({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('--template') }));
    }
  });
});

describe('lineFieldMapper', () => {
  const doc = { _id: '4983', title: 'Microstructural development', text: 'Alterations of the architecture', meta: { year: 2004 } };

  it('takes the id and text from the named fields, or builds the text from the template', () => {
    const warnings: string[] = [];
    const byField = lineFieldMapper({ idField: '_id', textField: 'title' }, (m) => warnings.push(m));
    expect(byField(doc, 1)).toMatchObject({ id: '4983', text: 'Microstructural development' });
    const byTemplate = lineFieldMapper({ idField: '_id', template: '{title}. {text} ({meta.year}){missing}' }, (m) => warnings.push(m));
    expect(byTemplate(doc, 1).text).toBe('Microstructural development. Alterations of the architecture (2004)');
    expect(warnings).toEqual([]);
  });

  it('warns once, naming the field, when lines have an id-like field but no id', () => {
    const warnings: string[] = [];
    const plain = lineFieldMapper({}, (m) => warnings.push(m));
    expect(plain({ doc_id: 'a', text: 'x' }, 3)).toEqual({ doc_id: 'a', text: 'x' });
    plain({ doc_id: 'b', text: 'y' }, 4);
    expect(warnings).toEqual(['line 3 has no "id" but has "doc_id": ids will be line numbers; pass --id-field doc_id to keep them (shown once)']);
    plain({ id: 1, _id: 'c', text: 'z' }, 5);
    expect(warnings).toHaveLength(1);
  });

  it('says which field is missing or of the wrong type', () => {
    const mapper = lineFieldMapper({ idField: '_id', textField: 'abstract' }, () => undefined);
    expect(() => mapper({ _id: 'x' }, 1)).toThrow('no "abstract" field (--text-field abstract)');
    expect(() => mapper({ abstract: 'a' }, 1)).toThrow('no "_id" field (--id-field _id)');
    expect(() => mapper({ _id: ['x'], abstract: 'a' }, 1)).toThrow('"_id" (--id-field) is not a string or a number');
    expect(() => lineFieldMapper({ textField: 'a', template: '{b}' }, () => undefined)).toThrow('give one');
    expect(() => lineFieldMapper({ template: '{title}' }, () => undefined)({ text: 'no title' }, 1)).toThrow('none of the fields of --template');
  });

  it('recognises id-like field names', () => {
    expect(['_id', 'ID', 'Id', 'doc_id', 'uniq_id', 'docid', 'corpus-id', 'id_', 'uuid'].filter(looksLikeId)).toHaveLength(9);
    expect(['id', 'idea', 'valid', 'title', 'text', 'video'].filter(looksLikeId)).toEqual([]);
  });
});

describe('input progress', () => {
  it('says "ETA …" until two chunks give a rate, then estimates from the rate since the first', () => {
    const eta = new InputEta(1_000_000);
    expect(eta.text).toBe('ETA …');
    // The first chunk finishes after a 20 s model load: no estimate from that.
    expect(eta.update(10_000, 20_000)).toBe('ETA …');
    // 90 kB more in 1 s: 900 kB left at 90 kB/s.
    expect(eta.update(100_000, 21_000)).toBe('ETA 10s');
    expect(eta.update(1_000_000, 30_000)).toBe('done');
  });

  it('formats durations', () => {
    expect([formatDuration(0.4), formatDuration(59), formatDuration(65), formatDuration(3 * 3600 + 125)]).toEqual(['0s', '59s', '1m 05s', '3h 02m']);
  });

  it('closes an encode run with one summary line', () => {
    expect(summaryLine('encode', { lines: 2000, resumed: 0, truncated: 37, tokens: 439_123, seconds: 8.4 })).toBe(
      'encode: 2,000 lines (37 truncated) in 8.4 s, 439,123 tokens, 52,277 tokens/s',
    );
    expect(summaryLine('encode', { lines: 10, resumed: 5, truncated: 0, tokens: 100, seconds: 1 })).toBe('encode: 10 lines after 5 resumed (0 truncated) in 1.0 s, 100 tokens, 100 tokens/s');
    expect(summaryLine('encode', { lines: 1_234_567, resumed: 1000, truncated: 999, tokens: 1_000_000_000, seconds: 1000 })).toBe(
      'encode: 1,234,567 lines after 1,000 resumed (999 truncated) in 1000.0 s, 1,000,000,000 tokens, 1,000,000 tokens/s',
    );
  });

  it('groups digits as en-US toLocaleString does, without loading ICU', () => {
    for (const value of [0, 7, 999, 1000, 12_345, 999_999, 1_000_000, 123_456_789_012, -1234, 52_276.6]) {
      expect(groupDigits(value)).toBe(Math.round(value).toLocaleString('en-US'));
    }
  });
});
