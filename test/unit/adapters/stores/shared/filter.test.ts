import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../../adapters/protocol/errors.js';
import { validateFilter } from '../../../../../adapters/stores/shared/filter.js';

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
    ['page = 1e3', 'write 1e3 without an exponent (1000)'],
    ['vector = 1', 'unknown column "vector"'],
    ['pages = 1', 'unknown column "pages"'],
    ["page = 1; DROP TABLE chunks", 'unexpected ";"'],
    ['(page = 1', 'unbalanced'],
    ['page = 1)', 'unbalanced'],
    ['AND OR', 'no column or value'],
    ["source = 'unterminated", `unexpected "'" at character 10: a string that is never closed`],
    ['source = "a.pdf"', 'strings take single quotes'],
    ['`page = 1', 'unexpected "`"'],
    // The same grammar as the tree every non-SQL backend evaluates: what it cannot parse is refused here.
    ['page 3', 'expected operator before "3"'],
    ['page = 1 AND', 'expected identifier at the end'],
    ['page = chunk', "expected a 'string' or a number"],
    ['page NOT = 1', 'NOT after page'],
    [`${'('.repeat(40)}page = 1${')'.repeat(40)}`, 'nested deeper than 32'],
    // Values of the column's type (LanceDB answered these with a planner error and a Rust backtrace).
    ["page = 'abc'", `page is a whole number: compare it with a number, unquoted (page = 3), not 'abc'`],
    ["page = '3'", `page is a whole number: compare it with a number, unquoted (page = 3), not '3'`],
    ['page = 99999999999999999999999', 'page is a whole number of at most 2147483647'],
    // LanceDB answered a fraction against its Int32 column with its planner error.
    ['page = 1.5', 'page is a whole number: compare it with a whole number (page = 3), not 1.5'],
    ['chunk BETWEEN 0.5 AND 2', 'chunk is a whole number'],
    ["chunk IN (1, 'x')", 'chunk is a whole number'],
    ["start BETWEEN 'a' AND 5", 'start is a whole number'],
    ["page LIKE '3%'", 'LIKE matches text, and page is a number'],
    ['document_id = 1', "document_id is text: quote the value (document_id = '1')"],
    ['source IN (TRUE)', "source is text: quote the value (source = 'true')"],
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
