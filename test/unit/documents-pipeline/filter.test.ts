import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../adapters/protocol/errors.js';
import { validateFilter } from '../../../adapters/sinks/filter.js';

describe('validateFilter', () => {
  it('passes comparisons over known columns, quoting the column names', () => {
    expect(validateFilter("source LIKE '%a.pdf' AND page <= 3")).toBe("`source` LIKE '%a.pdf' AND `page` <= 3");
    expect(validateFilter("end > 10 or heading is not null")).toBe('`end` > 10 OR `heading` IS NOT NULL');
    expect(validateFilter("document_id IN ('a', 'b''c')")).toBe("`document_id` IN ( 'a' , 'b''c' )");
  });

  it.each([
    ['', 'empty'],
    ['vector = 1', 'unknown column "vector"'],
    ['pages = 1', 'unknown column "pages"'],
    ["page = 1; DROP TABLE chunks", 'unexpected ";"'],
    ['(page = 1', 'unbalanced'],
    ['page = 1)', 'unbalanced'],
    ['AND OR', 'no column or value'],
    ["source = 'unterminated", 'unexpected'],
  ])('refuses %j (%s)', (expression, message) => {
    let caught: unknown;
    try {
      validateFilter(expression);
    } catch (error) {
      caught = error;
    }
    expect(caught).toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining(message) });
  });
});
