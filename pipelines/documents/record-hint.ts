/**
 * What is wrong with a stdin record of `shoal ingest -` that is not `{"id","text"}` or
 * `{"id","path"}`, in words a user can act on: the fields the line has, and a jq command that
 * reshapes such lines. The commonest case is a corpus under other names (a BEIR/SciFact line is
 * `{"_id","title","text"}`), which the bare "expected ..." message left to guesswork.
 */

const RECORD_FIELDS = new Set(['id', 'text', 'path', 'metadata']);

/** A jq path for a field: `.name`, or `.["odd name"]` when the name is not an identifier. */
function jqField(name: string): string {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? `.${name}` : `.[${JSON.stringify(name)}]`;
}

/** The field that most looks like an id under another name (`_id`, `doc_id`, `uniq_id`, `ID`...). */
function idLikeField(keys: readonly string[]): string | undefined {
  return keys.find((key) => /^_*id$/i.test(key)) ?? keys.find((key) => /[_-]?id$/i.test(key) && key !== 'id');
}

/** A numeric id JSON carries exactly: not a whole number over 2^53, which JSON.parse has already rounded (two such ids could become one). */
export function exactId(id: number): boolean {
  return !Number.isInteger(id) || Number.isSafeInteger(id);
}

export const INEXACT_ID = 'is a whole number over 2^53, which JSON readers round: write it as a string, its digits in quotes';

/**
 * The number of an `"id"` as the line wrote it (`99999999999999999999`), which JSON.parse has
 * rounded (`100000000000000000000`): the advice quotes the user's own digits, never a rounded or
 * made-up id that could be taken for theirs. Undefined when the line does not show it.
 */
function writtenNumber(line: string, id: number): string | undefined {
  for (const match of line.matchAll(/"id"\s*:\s*(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g)) {
    const written = match[1];
    if (written !== undefined && Number(written) === id) return written;
  }
  return undefined;
}

/** Why `value` is no record; `line`, the text it was parsed from, lets an inexact id be quoted as written. */
export function recordProblem(value: unknown, line?: string): string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return `got ${Array.isArray(value) ? 'an array' : value === null ? 'null' : `a ${typeof value}`}, not an object`;
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  const problems: string[] = [`got ${keys.length === 0 ? 'no fields' : `the fields ${keys.map((key) => JSON.stringify(key)).join(', ')}`}`];
  if ('text' in record && 'path' in record) problems.push('give "text" or "path", not both');
  for (const field of ['id', 'text', 'path'] as const) {
    const given = record[field];
    if (given === undefined) continue;
    const ok = field === 'id' ? (typeof given === 'string' && given !== '') || (typeof given === 'number' && Number.isFinite(given)) : typeof given === 'string';
    if (!ok) problems.push(`"${field}" must be ${field === 'id' ? 'a non-empty string or a number' : 'a string'}`);
    if (field === 'id' && typeof given === 'number' && !exactId(given)) {
      const written = line === undefined ? undefined : writtenNumber(line, given);
      problems.push(`"id" ${INEXACT_ID}${written === undefined ? '' : `: "id": "${written}"`}`);
    }
  }
  const metadata = record.metadata;
  if (metadata !== undefined && (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata))) problems.push('"metadata" must be an object of fields ({"title": "...", "year": 2024})');
  const extra = keys.filter((key) => !RECORD_FIELDS.has(key));
  if (extra.length > 0 || !('id' in record) || !('text' in record || 'path' in record)) {
    const id = 'id' in record ? 'id' : idLikeField(keys) ?? 'ID_FIELD';
    const text = 'text' in record ? 'text' : 'path' in record ? 'path' : undefined;
    const title = keys.find((key) => /^title$/i.test(key));
    const body = text === 'path' ? `path: ${jqField('path')}` : text === undefined ? `text: ${jqField('TEXT_FIELD')}` : title === undefined ? `text: ${jqField(text)}` : `text: (${jqField(title)} + ". " + ${jqField(text)})`;
    if (!('id' in record)) problems.push('no "id"');
    if (!('text' in record || 'path' in record)) problems.push('no "text" or "path"');
    if (extra.length > 0) problems.push(`other fields are not allowed (${extra.map((key) => JSON.stringify(key)).join(', ')}): put them in "metadata", or lift them there with --metadata-fields ${extra.slice(0, 3).join(',')}`);
    problems.push(`reshape the lines first, e.g. jq -c '{id: ${jqField(id)}, ${body}}'`);
  }
  return problems.join('; ');
}
