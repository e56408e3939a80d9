import type { z } from 'zod';
import { ErrorCode, ShoalError } from './errors.js';

type Issue = z.core.$ZodIssue;

/** What zod says of a union none of whose options matched, naming neither field nor fix. */
const BARE_UNION_MESSAGE = 'Invalid input';

/**
 * The issues with each bare union failure replaced by the issues of its closest option, under the
 * union's path: an item `{"id": {}, "text": "x"}` is then `items.0.id: must be a string…` instead
 * of `items.0: Invalid input`. The closest option is the one with the fewest issues among those
 * the value had the right type for (an option expecting a string says nothing useful of an
 * object). A union with a message of its own keeps it.
 */
export function explainIssues(issues: readonly Issue[]): Issue[] {
  return issues.flatMap((issue): Issue[] => {
    if (issue.code !== 'invalid_union' || issue.message !== BARE_UNION_MESSAGE) return [issue];
    const closest = closestOption(issue.errors);
    if (closest === null) return [wrongTypeForEveryOption(issue) ?? issue];
    return explainIssues(closest).map((inner) => ({ ...inner, path: [...issue.path, ...inner.path] }));
  });
}

/**
 * A union whose every option refused the value's type (a missing field, a number where text or an
 * object goes): one message naming every type it takes, as zod words a plain field's.
 */
function wrongTypeForEveryOption(issue: Extract<Issue, { code: 'invalid_union' }>): Issue | null {
  const expected: string[] = [];
  let received = '';
  for (const option of issue.errors) {
    const root = option.find((inner) => inner.path.length === 0 && inner.code === 'invalid_type');
    if (root === undefined || root.code !== 'invalid_type') return null;
    if (!expected.includes(root.expected)) expected.push(root.expected);
    received = /received (\w+)$/.exec(root.message)?.[1] ?? received;
  }
  if (expected.length === 0) return null;
  return { ...issue, message: `Invalid input: expected ${expected.join(' or ')}${received === '' ? '' : `, received ${received}`}` };
}

function closestOption(options: readonly (readonly Issue[])[]): readonly Issue[] | null {
  const typed = options.filter((option) => option.length > 0 && !option.some((issue) => issue.path.length === 0 && issue.code === 'invalid_type'));
  if (typed.length === 0) return null;
  return typed.reduce((best, option) => (option.length < best.length ? option : best));
}

/** Issues named in a message; the rest are counted. */
const MAX_ISSUES = 20;
/** Longest message and path of one issue: zod lists every unknown key in one message. */
const MAX_ISSUE_CHARS = 300;

function capped(text: string): string {
  return text.length <= MAX_ISSUE_CHARS ? text : `${text.slice(0, MAX_ISSUE_CHARS)}… (${text.length - MAX_ISSUE_CHARS} more characters)`;
}

function issuePath(issue: Issue): string {
  return issue.path.length > 0 ? capped(issue.path.map(String).join('.')) : '(root)';
}

/**
 * One line per problem, `path: message`, so a user sees every field to fix at once; bounded
 * (MAX_ISSUES issues of MAX_ISSUE_CHARS each), whatever the input, as every error crossing a
 * boundary must be.
 */
export function describeIssues(rawIssues: readonly Issue[]): string {
  return describeExplained(explainIssues(rawIssues));
}

function describeExplained(issues: readonly Issue[]): string {
  const named = issues.slice(0, MAX_ISSUES).map((issue) => `${issuePath(issue)}: ${capped(issue.message)}`);
  if (issues.length > MAX_ISSUES) named.push(`and ${issues.length - MAX_ISSUES} more`);
  return named.join('; ');
}

/**
 * Parses untrusted input with a zod schema; failures become ShoalError(code) naming each bad field.
 * `what` names the thing being parsed ("encode request", "catalog file x.yaml") for the message.
 */
export function parseWith<S extends z.ZodType>(
  schema: S,
  input: unknown,
  what: string,
  code: ErrorCode = ErrorCode.INVALID_INPUT,
): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issues = explainIssues(result.error.issues);
  throw new ShoalError(code, `invalid ${what}: ${describeExplained(issues)}`, {
    details: {
      issues: issues.slice(0, MAX_ISSUES).map((issue) => ({ path: issue.path.slice(0, 32).map((part) => capped(String(part))), message: capped(issue.message) })),
    },
  });
}
