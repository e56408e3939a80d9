import type { Readable } from 'node:stream';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';

/**
 * A streaming RFC 4180 CSV reader: comma-separated fields, optional double quotes around a field
 * (inside them commas, CR/LF and doubled quotes `""` are data), CRLF or LF record ends, a header
 * record naming the columns. Records come out as soon as they end, so memory holds one record
 * (bounded by `maxRecordChars`) whatever the file size. A UTF-8 BOM is skipped.
 */

export const MAX_CSV_RECORD_CHARS = 16 * 1024 * 1024;

export interface CsvRecord {
  /** 1-based record number after the header. */
  number: number;
  fields: Record<string, string>;
  /** Bytes of the input consumed when the record ended (for progress). */
  endOffset: number;
}

const QUOTE = 34;
const COMMA = 44;
const CR = 13;
const LF = 10;

export async function* readCsvRecords(stream: Readable, source: string, maxRecordChars = MAX_CSV_RECORD_CHARS): AsyncGenerator<CsvRecord> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let header: string[] | null = null;
  let fields: string[] = [];
  let field = '';
  let recordChars = 0;
  let quoted = false;
  /** Just saw a quote inside a quoted field: either the end of the quotes or the first of `""`. */
  let quoteInQuoted = false;
  /** The field started with a quote (then only a separator may follow its closing quote). */
  let fieldWasQuoted = false;
  let afterCr = false;
  let bytes = 0;
  let number = 0;
  let first = true;

  const fail = (message: string): never => {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `${source} record ${number + 1}: ${message}`, { details: { record: number + 1 } });
  };
  const endRecord = (): CsvRecord | null => {
    fields.push(field);
    const values = fields;
    fields = [];
    field = '';
    fieldWasQuoted = false;
    recordChars = 0;
    if (values.length === 1 && values[0] === '') return null; // a blank line
    if (header === null) {
      header = values.map((name) => name.trim());
      return null;
    }
    if (values.length !== header.length) fail(`has ${values.length} fields, the header has ${header.length}`);
    number += 1;
    const out: Record<string, string> = {};
    header.forEach((name, i) => {
      out[name] = values[i] ?? '';
    });
    return { number, fields: out, endOffset: bytes };
  };

  for await (const chunk of stream) {
    const buffer: Buffer = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : Buffer.from(chunk as Uint8Array);
    let text: string;
    try {
      text = decoder.decode(buffer, { stream: true });
    } catch (error) {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `${source}: not valid UTF-8 near byte ${bytes}`, { cause: error });
    }
    bytes += buffer.byteLength;
    let start = 0;
    if (first && text.charCodeAt(0) === 0xfeff) start = 1;
    first = false;
    const ready: CsvRecord[] = [];
    try {
      parseChunk(text, start, ready);
    } catch (error) {
      // The records that ended before the bad one still come out: the caller writes them first.
      for (const record of ready) yield { ...record, endOffset: bytes };
      throw error;
    }
    // Records of this chunk carry the chunk's end offset (progress granularity is one read).
    for (const record of ready) yield { ...record, endOffset: bytes };
  }
  if (quoted && !quoteInQuoted) fail('ends inside a quoted field');
  if (field.length > 0 || fields.length > 0 || fieldWasQuoted) {
    const record = endRecord();
    if (record !== null) yield record;
  }
  if (header === null) throw new ShoalError(ErrorCode.INVALID_INPUT, `${source}: no header record (the first line must name the columns)`);

  function parseChunk(text: string, start: number, ready: CsvRecord[]): void {
    for (let i = start; i < text.length; i++) {
      const code = text.charCodeAt(i);
      if (quoted) {
        if (quoteInQuoted) {
          quoteInQuoted = false;
          if (code === QUOTE) {
            field += '"';
            continue;
          }
          quoted = false; // The quote closed the field; this character is handled below.
        } else if (code === QUOTE) {
          quoteInQuoted = true;
          continue;
        } else {
          field += text[i];
          if (++recordChars > maxRecordChars) fail(`longer than ${maxRecordChars} characters (an unclosed quote?)`);
          continue;
        }
      }
      if (afterCr && code !== LF) fail('a CR not followed by LF outside quotes');
      afterCr = false;
      if (code === COMMA) {
        fields.push(field);
        field = '';
        fieldWasQuoted = false;
      } else if (code === CR) {
        afterCr = true;
      } else if (code === LF) {
        const record = endRecord();
        if (record !== null) ready.push(record);
      } else if (code === QUOTE) {
        if (field.length > 0 || fieldWasQuoted) fail('a quote inside an unquoted field (quote the whole field and double inner quotes)');
        quoted = true;
        fieldWasQuoted = true;
      } else {
        if (fieldWasQuoted) fail('characters after the closing quote of a field');
        field += text[i];
        if (++recordChars > maxRecordChars) fail(`longer than ${maxRecordChars} characters`);
      }
    }
  }
}
