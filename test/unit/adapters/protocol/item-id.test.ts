import { describe, expect, it } from 'vitest';
import { EncodeRequest, ItemId } from '../../../../adapters/protocol/requests.js';
import { parseWith } from '../../../../adapters/protocol/validate.js';

/** An id of the wrong type is answered with what an id may be, not zod's bare "Invalid input". */
describe('item ids', () => {
  it('accepts strings up to the limit and finite numbers', () => {
    expect(ItemId.parse('doc-1')).toBe('doc-1');
    expect(ItemId.parse(7)).toBe(7);
    expect(ItemId.parse('x'.repeat(512))).toHaveLength(512);
  });

  it('names the allowed types for objects, null, booleans and arrays, and the limit for long strings', () => {
    for (const id of [{ a: 1 }, null, true, [1]]) {
      expect(() => parseWith(ItemId, id, 'id')).toThrow('must be a string of at most 512 characters or a finite number');
    }
    expect(() => parseWith(ItemId, 'x'.repeat(513), 'id')).toThrow(/512/);
    expect(() => parseWith(EncodeRequest, { model: 'm', items: [{ id: { a: 1 }, text: 'x' }] }, 'request')).toThrow(
      /items\.0\.id: must be a string of at most 512 characters or a finite number/,
    );
  });

  it('explains a failed item by its closest shape: a text item by its text, an image item by its image', () => {
    const items = (item: unknown) => () => parseWith(EncodeRequest, { model: 'm', items: [item] }, 'request');
    expect(items({ id: 1, text: 5 })).toThrow(/^invalid request: items\.0\.text: Invalid input: expected string, received number$/);
    expect(items({ id: 1, image: 5 })).toThrow(/^invalid request: items\.0\.image: /);
    // No shape took it at all: every type the item may have is named.
    expect(items(5)).toThrow(/^invalid request: items\.0: Invalid input: expected string or object, received number$/);
  });
});
