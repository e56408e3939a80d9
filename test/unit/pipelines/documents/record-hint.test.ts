import { describe, expect, it } from 'vitest';
import { recordProblem } from '../../../../pipelines/documents/record-hint.js';

/** The words `shoal ingest -` answers a record that is not {"id","text"} / {"id","path"} with. */
describe('recordProblem', () => {
  it('names the fields of a corpus under other names and a jq command that reshapes it', () => {
    expect(recordProblem({ _id: '4983', title: 'T', text: 'abc' })).toBe(
      `got the fields "_id", "title", "text"; no "id"; other fields are not allowed ("_id", "title"): put them in "metadata", or lift them there with --metadata-fields _id,title; reshape the lines first, e.g. jq -c '{id: ._id, text: (.title + ". " + .text)}'`,
    );
    // A field name jq cannot write as .name is quoted; a missing text field is a placeholder.
    expect(recordProblem({ 'doc-id': 7, body: 'x' })).toContain(`jq -c '{id: .["doc-id"], text: .TEXT_FIELD}'`);
  });

  it('says what is wrong with the values of an otherwise well-formed record', () => {
    expect(recordProblem({ id: '', text: 'a' })).toBe('got the fields "id", "text"; "id" must be a non-empty string or a number');
    expect(recordProblem({ id: 1, text: 3 })).toBe('got the fields "id", "text"; "text" must be a string');
    expect(recordProblem({ id: 1, text: 'a', path: 'b' })).toBe('got the fields "id", "text", "path"; give "text" or "path", not both');
  });

  it('quotes an id over 2^53 with the digits the line wrote, never a rounded or made-up one', () => {
    const line = '{"id":99999999999999999999,"text":"x"}';
    expect(recordProblem(JSON.parse(line), line)).toBe(
      'got the fields "id", "text"; "id" is a whole number over 2^53, which JSON readers round: write it as a string, its digits in quotes: "id": "99999999999999999999"',
    );
    // A nested "id" of another value is not taken for it.
    const nested = '{"metadata":{"id":7},"id" : 9007199254740993,"text":"x"}';
    expect(recordProblem(JSON.parse(nested), nested)).toContain('its digits in quotes: "id": "9007199254740993"');
    // Without the line (records handed over as values), the advice quotes no number at all.
    expect(recordProblem({ id: 2 ** 60, text: 'x' })).toMatch(/write it as a string, its digits in quotes$/);
  });

  it('names a line that is not an object', () => {
    expect(recordProblem([1, 2])).toBe('got an array, not an object');
    expect(recordProblem('text')).toBe('got a string, not an object');
    expect(recordProblem(null)).toBe('got null, not an object');
  });
});
