import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { redactUri } from '../../protocol/uri-credentials.js';
import { reservedSuffixOf } from './table-names.js';

/**
 * The pieces every backend's URI parser is made of: the refusal (INVALID_INPUT naming the field
 * `index`, and the forms the registry accepts), the table-name rule, hosts, ports, and query
 * parameters checked against the ones a form knows. One place, so `--index` errors read alike
 * whatever the backend.
 */

/** Every accepted form, set by the registry once it has listed its backends (registry.ts). */
let acceptedForms = '';

export function setAcceptedForms(forms: string): void {
  acceptedForms = forms;
}

/** A bad `--index` (CLI) or index URI (configuration, jobs): the edge words the field. */
export function invalidIndex(message: string): ShoalError {
  return new ShoalError(ErrorCode.INVALID_INPUT, `index: ${message} (accepted: ${acceptedForms})`, { details: { field: 'index' } });
}

/**
 * A value built on its first use. The URI schemas below are built so: a zod schema takes a few
 * milliseconds to build, and every command imports the backends (the settings table lists their
 * variables), `shoal encode` included, which never parses an index URI.
 */
export function onFirstUse<T>(make: () => T): () => T {
  let value: T | undefined;
  return () => (value ??= make());
}

export const tableNamePart = onFirstUse(() =>
  z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,48}$/, "1 to 48 letters, digits, '_' or '-'")
    // `T__documents`, `T__spec`... are table T's own relations (shared/table-spec.ts).
    .superRefine((name, context) => {
      const suffix = reservedSuffixOf(name);
      if (suffix !== undefined) context.addIssue({ code: 'custom', message: `${JSON.stringify(name)} ends in ${suffix}, which names another table's state, spec or index` });
    }),
);
export const hostPart = onFirstUse(() => z.string().min(1).max(253).regex(/^[A-Za-z0-9.-]+$|^\[[0-9A-Fa-f:.]+\]$/, 'a host name or address'));
export const portPart = onFirstUse(() => z.coerce.number().int().min(1).max(65_535));
export const flagPart = onFirstUse(() => z.enum(['true', 'false', '1', '0']).transform((value) => value === 'true' || value === '1'));

/** `value` through `schema`, or the refusal naming `form` and the first issue. */
export function parsePart<T extends z.ZodType>(schema: T, value: unknown, form: string): z.output<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw invalidIndex(`${form}: ${issue === undefined ? 'invalid' : `${issue.path.join('.') || 'value'}: ${issue.message}`}`);
  }
  return parsed.data;
}

/** The URI's query parameters, each one of `allowed`. */
export function queryParts(url: URL, allowed: readonly string[], form: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of url.searchParams) {
    if (!allowed.includes(key)) throw invalidIndex(`${form}: unknown parameter ${JSON.stringify(key)} (known: ${allowed.join(', ') || 'none'})`);
    out[key] = value;
  }
  return out;
}

/** The query string after the first `?` of a URI whose path is not a URL's (`lancedb://DIR?…`, `s3://…?…`), checked. */
export function trailingQuery(uri: string, allowed: readonly string[], form: string): { base: string; params: Record<string, string> } {
  const at = uri.indexOf('?');
  if (at === -1) return { base: uri, params: {} };
  return { base: uri.slice(0, at), params: queryParts(new URL(`x://x/?${uri.slice(at + 1)}`), allowed, form) };
}

export function parseUrl(uri: string): URL {
  try {
    return new URL(uri);
  } catch {
    throw invalidIndex(`${JSON.stringify(redactUri(uri))} is not a valid URI`);
  }
}

/** The scheme of an index URI (`postgres`, `file`…, lower case), or undefined for a bare folder path. */
export function uriScheme(value: string): string | undefined {
  return /^([a-z][a-z0-9+.-]*):\/\//i.exec(value)?.[1]?.toLowerCase();
}
