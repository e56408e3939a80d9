import { extname } from 'node:path';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../../../adapters/protocol/errors.js';
import { readCsvRecords } from '../../csv-records.js';
import { readLineChunks, type LineSource } from '../../jsonl.js';

/**
 * The products of `shoal classify`: CSV (header + records, RFC 4180) or JSON Lines (one object
 * per line), chosen by --format or the file extension, streamed in chunks so memory holds one
 * chunk however large the catalog.
 */

export type CatalogFormat = 'csv' | 'jsonl';

export interface ProductRecord {
  /** 1-based record number (data records only; blank lines are not counted). */
  number: number;
  fields: Record<string, unknown>;
  /** Input bytes consumed when the record ended (progress). */
  endOffset: number;
}

const JsonObject = z.record(z.string(), z.unknown());

export function catalogFormat(path: string | undefined, flag: CatalogFormat | undefined): CatalogFormat {
  if (flag !== undefined) return flag;
  const ext = path === undefined ? '' : extname(path).toLowerCase();
  return ext === '.csv' ? 'csv' : 'jsonl';
}

/** A JSON Lines product's fields, or the error that says why the line is not one. */
function productFields(text: string, where: string, line: number): Record<string, unknown> | ShoalError {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return new ShoalError(ErrorCode.INVALID_INPUT, `${where}: not valid JSON`, { cause: error, details: { line } });
  }
  const parsed = JsonObject.safeParse(value);
  return parsed.success ? parsed.data : new ShoalError(ErrorCode.INVALID_INPUT, `${where}: expected a JSON object (one product per line)`, { details: { line } });
}

async function* jsonlRecords(source: LineSource, chunkSize: number): AsyncGenerator<ProductRecord[]> {
  let number = 0;
  for await (const lines of readLineChunks(source, chunkSize)) {
    const out: ProductRecord[] = [];
    for (const line of lines) {
      if (line.text.trim() === '') continue;
      const fields = productFields(line.text, `${source.name} line ${line.number}`, line.number);
      if (fields instanceof ShoalError) {
        // The products before the bad line are classified and written first, then the run stops.
        if (out.length > 0) yield out;
        throw fields;
      }
      number += 1;
      out.push({ number, fields, endOffset: line.endOffset });
    }
    if (out.length > 0) yield out;
  }
}

async function* csvRecords(source: LineSource, chunkSize: number): AsyncGenerator<ProductRecord[]> {
  let chunk: ProductRecord[] = [];
  try {
    for await (const record of readCsvRecords(source.stream, source.name)) {
      chunk.push(record);
      if (chunk.length >= chunkSize) {
        yield chunk;
        chunk = [];
      }
    }
  } catch (error) {
    // The records before the bad one are classified and written first, then the run stops.
    if (chunk.length > 0) yield chunk;
    throw error;
  }
  if (chunk.length > 0) yield chunk;
}

export function readProducts(source: LineSource, format: CatalogFormat, chunkSize: number): AsyncGenerator<ProductRecord[]> {
  return format === 'csv' ? csvRecords(source, chunkSize) : jsonlRecords(source, chunkSize);
}

/** A field as text: strings as they are, numbers and booleans printed, arrays joined, anything else (null, objects) empty. */
export function fieldText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return value.map(fieldText).filter((text) => text.length > 0).join(', ');
  return '';
}

/** `{name}` placeholders of a --template (`{ title }` is `title`). */
const PLACEHOLDER = /\{([^{}]+)\}/g;

/** The fields a --template names, in order of first use. */
export function templateFields(template: string): string[] {
  return [...new Set([...template.matchAll(PLACEHOLDER)].map((match) => (match[1] ?? '').trim()).filter((name) => name.length > 0))];
}

/**
 * The text a product is embedded as: `template` with `{field}` placeholders, or (no template)
 * the non-empty `fields` joined by newlines.
 */
export function productText(fields: Record<string, unknown>, names: readonly string[], template: string | undefined): string {
  if (template !== undefined) return template.replace(PLACEHOLDER, (_, name: string) => fieldText(fields[name.trim()]));
  return names
    .map((name) => fieldText(fields[name]).trim())
    .filter((text) => text.length > 0)
    .join('\n');
}

/**
 * How `shoal classify` builds a product's text: `--fields` (default title,description) or
 * `--template`, and the fields that text comes from.
 */
export interface ProductTextSpec {
  fields: readonly string[];
  template: string | undefined;
  /** `fields` are the default (no --fields given): a catalog may have some of them only. */
  defaultFields?: boolean | undefined;
}

/** The flag the text comes from, for messages: `--fields title,description` or `--template "{title}. {brand}"`. */
export function textFlag(spec: ProductTextSpec): string {
  return spec.template === undefined ? `--fields ${spec.fields.join(',')}` : `--template ${JSON.stringify(spec.template)}`;
}

/** The fields the product text is built from. */
export function textFieldNames(spec: ProductTextSpec): string[] {
  return spec.template === undefined ? [...spec.fields] : templateFields(spec.template);
}

/**
 * False when every field the text is built from is missing or empty for this product: its text
 * would say nothing about it (a template's literal words alone are not a product), so it must
 * not be classified.
 */
export function hasProductText(fields: Record<string, unknown>, spec: ProductTextSpec): boolean {
  return textFieldNames(spec).some((name) => fieldText(fields[name]).trim().length > 0);
}

/** Records read before anything is classified, to check that the fields --fields / --template name exist. */
export const FIELD_CHECK_RECORDS = 256;
/** Field names listed in the "fields seen" of a misspelt --fields. */
const FIELDS_SHOWN = 12;

function shownName(name: string): string {
  return name.length > 40 ? `${name.slice(0, 39)}…` : name;
}

/**
 * A usage error (INVALID_INPUT) when a field named by --fields or --template is a key of none of
 * `records` (the first records of the catalog): a misspelt field would otherwise embed empty
 * text and put every product into the same category. `complete` says `records` are the whole
 * catalog (the message then says "no record", else "none of the first N records").
 */
export function checkTextFields(records: readonly ProductRecord[], spec: ProductTextSpec, complete: boolean): void {
  if (spec.template !== undefined && templateFields(spec.template).length === 0) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `--template ${JSON.stringify(spec.template)} names no field; write fields as {name}, e.g. '{title}. {brand}'`);
  }
  if (records.length === 0) return;
  const seen = new Set<string>();
  for (const record of records) for (const name of Object.keys(record.fields)) seen.add(name);
  const named = textFieldNames(spec);
  const missing = named.filter((name) => !seen.has(name));
  // The default fields are a guess: a catalog with titles and no descriptions is fine, one with neither is not.
  if (missing.length === 0 || (spec.defaultFields === true && spec.template === undefined && missing.length < named.length)) return;
  const names = [...seen];
  const listed = names.slice(0, FIELDS_SHOWN).map(shownName).join(', ');
  const more = names.length > FIELDS_SHOWN ? `, … (${names.length - FIELDS_SHOWN} more)` : '';
  const flag = spec.template === undefined ? `--fields ${missing.join(',')}` : `--template ${missing.map((name) => `{${name}}`).join(' ')}`;
  const where = complete ? 'no record has' : `none of the first ${records.length} records has`;
  const what = missing.length === 1 ? 'this field' : 'these fields';
  const hint = spec.defaultFields === true && spec.template === undefined ? '; name the text fields with --fields' : '';
  throw new ShoalError(ErrorCode.INVALID_INPUT, `${flag}${hint === '' ? '' : ' (the default)'}: ${where} ${what} (fields seen: ${listed}${more})${hint}`, { details: { missing, fieldsSeen: names.slice(0, FIELDS_SHOWN) } });
}

/**
 * Reads the catalog's first `window` records (at least; whole chunks) and checks the text
 * fields against them before anything is classified or written; returns every chunk, those
 * read ahead first. An input error met while reading ahead is thrown where it stands in the
 * stream, after the chunks before it, as without the look-ahead.
 */
export async function readCheckedProducts(chunks: AsyncGenerator<ProductRecord[]>, spec: ProductTextSpec, window = FIELD_CHECK_RECORDS): Promise<AsyncGenerator<ProductRecord[]>> {
  const ahead: ProductRecord[][] = [];
  let count = 0;
  let complete = false;
  let failure: { error: unknown } | null = null;
  try {
    while (count < window) {
      const next = await chunks.next();
      if (next.done === true) {
        complete = true;
        break;
      }
      ahead.push(next.value);
      count += next.value.length;
    }
  } catch (error) {
    failure = { error };
  }
  // A catalog that fails before its first product (another file given by mistake) fails now,
  // before a model is loaded or a category embedded: there is nothing before the error to write.
  if (failure !== null && ahead.length === 0) {
    await chunks.return(undefined);
    throw failure.error;
  }
  try {
    checkTextFields(ahead.flat(), spec, complete);
  } catch (error) {
    await chunks.return(undefined);
    throw error;
  }
  return (async function* replay(): AsyncGenerator<ProductRecord[]> {
    try {
      yield* ahead;
      if (failure !== null) throw failure.error;
      if (!complete) yield* chunks;
    } finally {
      await chunks.return(undefined);
    }
  })();
}
