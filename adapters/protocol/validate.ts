import type { z } from 'zod';
import { ErrorCode, ShoalError } from './errors.js';

/** One line per problem, `path: message`, so a user sees every field to fix at once. */
export function describeIssues(issues: readonly z.core.$ZodIssue[]): string {
  return issues
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
  const issues = result.error.issues;
  throw new ShoalError(code, `invalid ${what}: ${describeIssues(issues)}`, {
    details: {
      issues: issues.slice(0, 20).map((issue) => ({ path: issue.path.map(String), message: issue.message })),
    },
  });
}
