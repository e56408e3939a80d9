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

async function* jsonlRecords(source: LineSource, chunkSize: number): AsyncGenerator<ProductRecord[]> {
  let number = 0;
  for await (const lines of readLineChunks(source, chunkSize)) {
    const out: ProductRecord[] = [];
    for (const line of lines) {
      if (line.text.trim() === '') continue;
      let value: unknown;
      try {
        value = JSON.parse(line.text);
      } catch (error) {
        throw new ShoalError(ErrorCode.INVALID_INPUT, `${source.name} line ${line.number}: not valid JSON`, { cause: error, details: { line: line.number } });
      }
      const parsed = JsonObject.safeParse(value);
      if (!parsed.success) throw new ShoalError(ErrorCode.INVALID_INPUT, `${source.name} line ${line.number}: expected a JSON object (one product per line)`, { details: { line: line.number } });
      number += 1;
      out.push({ number, fields: parsed.data, endOffset: line.endOffset });
    }
    if (out.length > 0) yield out;
  }
}

async function* csvRecords(source: LineSource, chunkSize: number): AsyncGenerator<ProductRecord[]> {
  let chunk: ProductRecord[] = [];
  for await (const record of readCsvRecords(source.stream, source.name)) {
    chunk.push(record);
    if (chunk.length >= chunkSize) {
      yield chunk;
      chunk = [];
    }
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

/**
 * The text a product is embedded as: `template` with `{field}` placeholders, or (no template)
 * the non-empty `fields` joined by newlines.
 */
export function productText(fields: Record<string, unknown>, names: readonly string[], template: string | undefined): string {
  if (template !== undefined) return template.replace(/\{([^{}]+)\}/g, (_, name: string) => fieldText(fields[name.trim()]));
  return names
    .map((name) => fieldText(fields[name]).trim())
    .filter((text) => text.length > 0)
    .join('\n');
}
