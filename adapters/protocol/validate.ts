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
    if (closest === null) return [issue];
    return explainIssues(closest).map((inner) => ({ ...inner, path: [...issue.path, ...inner.path] }));
  });
}

function closestOption(options: readonly (readonly Issue[])[]): readonly Issue[] | null {
  const typed = options.filter((option) => option.length > 0 && !option.some((issue) => issue.path.length === 0 && issue.code === 'invalid_type'));
  if (typed.length === 0) return null;
  return typed.reduce((best, option) => (option.length < best.length ? option : best));
}

/** One line per problem, `path: message`, so a user sees every field to fix at once. */
export function describeIssues(rawIssues: readonly Issue[]): string {
  return explainIssues(rawIssues)
    .slice(0, 20)
    .map((issue) => {
      const path = issue.path.length > 0 ? issue.path.map(String).join('.') : '(root)';
      return `${path}: ${issue.message}`;
    })
    .join('; ');
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
  throw new ShoalError(code, `invalid ${what}: ${describeIssues(issues)}`, {
    details: {
      issues: issues.slice(0, 20).map((issue) => ({ path: issue.path.map(String), message: issue.message })),
    },
  });
}
