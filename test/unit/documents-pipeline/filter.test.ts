import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../adapters/protocol/errors.js';
import { validateFilter } from '../../../adapters/sinks/filter.js';

describe('validateFilter', () => {
  it('passes comparisons over known columns, quoting the column names', () => {
    expect(validateFilter("source LIKE '%a.pdf' AND page <= 3")).toBe("`source` LIKE '%a.pdf' AND `page` <= 3");
    expect(validateFilter("end > 10 or heading is not null")).toBe('`end` > 10 OR `heading` IS NOT NULL');
    expect(validateFilter("document_id IN ('a', 'b''c')")).toBe("`document_id` IN ( 'a' , 'b''c' )");
    // Operators as written; parentheses inside a string are text, not grouping.
    expect(validateFilter("page != 3 AND `source` NOT IN (')', '(')")).toBe("`page` != 3 AND `source` NOT IN ( ')' , '(' )");
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
    ['`page = 1', 'unexpected "`"'],
    // The same grammar as the tree every non-SQL backend evaluates: what it cannot parse is refused here.
    ['page 3', 'expected operator before "3"'],
    ['page = 1 AND', 'expected identifier at the end'],
    ['page = chunk', "expected a 'string' or a number"],
    ['page NOT = 1', 'NOT after page'],
    [`${'('.repeat(80)}page = 1${')'.repeat(80)}`, 'nested deeper than 64'],
    ['page = 1 OR '.repeat(400), 'longer than 4096 characters'],
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
