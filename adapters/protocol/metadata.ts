import { z } from 'zod';
import { ErrorCode, ShoalError } from './errors.js';

/**
 * A document's metadata (title, date, tags, URL...): stored with every chunk of the document,
 * returned with each search hit and filterable with `metadata.<key>` in `--filter`. The same
 * bounds hold wherever it enters (a JSON Lines record of `shoal ingest`, POST /v1/ingest records,
 * NATS document jobs, the automatic metadata of files), so every store can hold what one accepts:
 * keys are identifiers (they become JSON paths and payload keys, never quoted user text), values
 * are scalars or lists of strings, and the whole object is small beside a chunk.
 */

export const METADATA_KEY = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
export const MAX_METADATA_KEYS = 64;
/** Serialized size of one document's metadata (UTF-8 JSON): it is copied onto every chunk row. */
export const MAX_METADATA_BYTES = 16 * 1024;
/** Items of one list value. */
export const MAX_METADATA_LIST_ITEMS = 256;

export type MetadataValue = string | number | boolean | null | string[];
export type DocumentMetadata = Readonly<Record<string, MetadataValue>>;

const MetadataValueSchema = z.union([
  z.string(),
  z.number().finite(),
  z.boolean(),
  z.null(),
  z.array(z.string()).max(MAX_METADATA_LIST_ITEMS, `a list holds at most ${MAX_METADATA_LIST_ITEMS} strings`),
]);

/** The metadata object as a zod schema (HTTP and NATS edges); the checks beyond shape are in `checkMetadata`. */
export const DocumentMetadataSchema = z
  .record(z.string(), z.unknown())
  .superRefine((value, context) => {
    const problem = metadataProblem(value);
    if (problem !== null) context.addIssue({ code: 'custom', message: problem });
  })
  .transform((value) => value as Record<string, MetadataValue>);

function describe(value: unknown): string {
  if (Array.isArray(value)) return 'a list with a non-string item';
  if (value === null) return 'null';
  if (typeof value === 'number') return 'a number that is not finite';
  return typeof value === 'object' ? 'an object (metadata is flat)' : `a ${typeof value}`;
}

/** What is wrong with a metadata object, naming the field, or null when it is valid. */
export function metadataProblem(value: unknown): string | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return `metadata must be an object of fields, not ${Array.isArray(value) ? 'a list' : describe(value)}`;
  const keys = Object.keys(value);
  if (keys.length > MAX_METADATA_KEYS) return `metadata has ${keys.length} fields, over the limit of ${MAX_METADATA_KEYS}`;
  for (const key of keys) {
    if (!METADATA_KEY.test(key)) return `metadata field ${JSON.stringify(key.slice(0, 80))} is not a name of 1-64 letters, digits and _ (not starting with a digit)`;
    const field = (value as Record<string, unknown>)[key];
    const parsed = MetadataValueSchema.safeParse(field);
    if (!parsed.success) {
      const detail = Array.isArray(field) && field.length > MAX_METADATA_LIST_ITEMS ? `a list of ${field.length} items, over ${MAX_METADATA_LIST_ITEMS}` : describe(field);
      return `metadata field "${key}" is ${detail}: values are strings, numbers, true/false, null or lists of strings`;
    }
  }
  const bytes = Buffer.byteLength(JSON.stringify(value), 'utf8');
  if (bytes > MAX_METADATA_BYTES) return `metadata is ${bytes} bytes as JSON, over the limit of ${MAX_METADATA_BYTES}`;
  return null;
}

/** The metadata, checked and frozen, or INVALID_INPUT starting with `where` (`stdin line 3`, `records[2]`). */
export function checkMetadata(value: unknown, where: string): DocumentMetadata {
  const problem = metadataProblem(value);
  if (problem !== null) throw new ShoalError(ErrorCode.INVALID_INPUT, `${where}: ${problem}`);
  return Object.freeze({ ...(value as Record<string, MetadataValue>) });
}
