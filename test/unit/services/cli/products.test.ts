import { describe, expect, it } from 'vitest';
import { ShoalError } from '../../../../adapters/protocol/errors.js';
import { checkTextFields, hasProductText, productText, readCheckedProducts, templateFields, type ProductRecord } from '../../../../services/cli/commands/classify/products.js';

/** How `shoal classify` builds product text: the check of --fields / --template names, empty texts, the look-ahead. */

const record = (number: number, fields: Record<string, unknown>): ProductRecord => ({ number, fields, endOffset: number * 10 });
const DEFAULT = { fields: ['title', 'description'], template: undefined };
const TITLE = { fields: ['title'], template: undefined };

function thrown(run: () => void): ShoalError {
  try {
    run();
  } catch (error) {
    if (error instanceof ShoalError) return error;
    throw error;
  }
  throw new Error('did not throw');
}

describe('checkTextFields', () => {
  const records = [record(1, { id: 'a', title: 'shoes' }), record(2, { id: 'b', title: '', description: null, brand: 'x' })];

  it('accepts fields some record has, even when empty or null there', () => {
    expect(() => checkTextFields(records, DEFAULT, true)).not.toThrow();
    expect(() => checkTextFields(records, { fields: ['brand'], template: undefined }, true)).not.toThrow();
    expect(() => checkTextFields([], { fields: ['nosuch'], template: undefined }, true)).not.toThrow();
  });

  it('refuses a field no record has, naming the fields seen (bounded)', () => {
    const error = thrown(() => checkTextFields(records, { fields: ['title', 'nosuch'], template: undefined }, true));
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toBe('--fields nosuch: no record has this field (fields seen: id, title, description, brand)');
    expect(thrown(() => checkTextFields(records, { fields: ['a', 'b'], template: undefined }, false)).message).toBe(
      '--fields a,b: none of the first 2 records has these fields (fields seen: id, title, description, brand)',
    );
    const wide = [record(1, Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`f${i}`, 'x'])))];
    expect(thrown(() => checkTextFields(wide, DEFAULT, true)).message).toBe(
      '--fields title,description: no record has these fields (fields seen: f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, … (8 more))',
    );
  });

  it('with the default fields (no --fields), refuses only a catalog that has none of them', () => {
    const defaulted = { ...DEFAULT, defaultFields: true };
    expect(() => checkTextFields([record(1, { title: 'shoes' })], defaulted, true)).not.toThrow();
    expect(thrown(() => checkTextFields([record(1, { title: 'shoes' })], DEFAULT, true)).message).toBe('--fields description: no record has this field (fields seen: title)');
    expect(thrown(() => checkTextFields([record(1, { name: 'shoes', desc: 'x' })], defaulted, true)).message).toBe(
      '--fields title,description (the default): no record has these fields (fields seen: name, desc); name the text fields with --fields',
    );
  });

  it('checks the placeholders of --template, and refuses a template naming no field', () => {
    expect(templateFields('{title}. { brand } {title}')).toEqual(['title', 'brand']);
    expect(() => checkTextFields(records, { fields: [], template: '{title} by {brand}' }, true)).not.toThrow();
    expect(thrown(() => checkTextFields(records, { fields: [], template: '{title} by {brnd}' }, true)).message).toBe(
      '--template {brnd}: no record has this field (fields seen: id, title, description, brand)',
    );
    expect(thrown(() => checkTextFields(records, { fields: [], template: 'a product' }, true)).message).toMatch(/^--template "a product" names no field/);
  });
});

describe('hasProductText', () => {
  it('is false when every named field is missing, null or blank, template literals notwithstanding', () => {
    expect(hasProductText({ title: 'shoes' }, DEFAULT)).toBe(true);
    expect(hasProductText({ title: '  ', description: null }, DEFAULT)).toBe(false);
    expect(hasProductText({ other: 'x' }, DEFAULT)).toBe(false);
    expect(hasProductText({ price: 0 }, { fields: ['price'], template: undefined })).toBe(true);
    const template = { fields: [], template: 'Product: {title} ({brand})' };
    expect(productText({}, [], template.template)).toBe('Product:  ()');
    expect(hasProductText({}, template)).toBe(false);
    expect(hasProductText({ brand: 'Acme' }, template)).toBe(true);
  });
});

describe('readCheckedProducts', () => {
  async function collect(chunks: AsyncGenerator<ProductRecord[]>): Promise<number[][]> {
    const out: number[][] = [];
    for await (const chunk of chunks) out.push(chunk.map((r) => r.number));
    return out;
  }

  it('reads ahead whole chunks up to the window and then yields every chunk once, in order', async () => {
    let read = 0;
    async function* source(): AsyncGenerator<ProductRecord[]> {
      for (let c = 0; c < 5; c++) {
        read += 1;
        yield [record(c * 2 + 1, { title: 't' }), record(c * 2 + 2, { title: 't' })];
      }
    }
    const products = await readCheckedProducts(source(), TITLE, 3);
    expect(read).toBe(2);
    expect(await collect(products)).toEqual([[1, 2], [3, 4], [5, 6], [7, 8], [9, 10]]);
  });

  it('fails before yielding anything when the first records lack a field, and closes the source', async () => {
    let closed = false;
    async function* source(): AsyncGenerator<ProductRecord[]> {
      try {
        yield [record(1, { name: 'x' })];
        yield [record(2, { title: 'late' })];
      } finally {
        closed = true;
      }
    }
    await expect(readCheckedProducts(source(), { fields: ['title'], template: undefined }, 1)).rejects.toThrow('--fields title: none of the first 1 records has this field (fields seen: name)');
    expect(closed).toBe(true);
  });

  it('throws an input error met while reading ahead where it stands, after the chunks before it', async () => {
    async function* source(): AsyncGenerator<ProductRecord[]> {
      yield [record(1, { title: 't' })];
      throw new ShoalError('INVALID_INPUT', 'catalog line 2: not valid JSON');
    }
    const products = await readCheckedProducts(source(), TITLE, 10);
    const seen: number[] = [];
    await expect(
      (async () => {
        for await (const chunk of products) seen.push(...chunk.map((r) => r.number));
      })(),
    ).rejects.toThrow('catalog line 2: not valid JSON');
    expect(seen).toEqual([1]);
  });
});
