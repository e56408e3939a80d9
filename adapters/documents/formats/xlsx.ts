import { Parser } from 'htmlparser2';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { defineFormat, tooLarge, whole, type OpenedBody } from './format.js';
import { coreTitle, relationshipId, relationships, zipContainer } from './ooxml.js';
import { dateStyles, serialToIso, type DateStyle } from './xlsx-dates.js';
import { child, descendants, parseXml } from './xml.js';
import { ZipArchive } from './zip-archive.js';

/**
 * XLSX (Excel): a ZIP holding xl/workbook.xml. One page per sheet in workbook order (hidden
 * sheets included): the sheet's name as its first line and heading, then one line per row that
 * has a value, its cells joined by a tab, an empty cell between two values kept as an empty
 * field so columns stay in place. Values as stored: shared and inline strings (phonetic runs
 * left out), numbers as written in the file, except that a number whose cell format shows a date
 * or time is written as ISO 8601 (xlsx-dates.ts; no other number format is applied), booleans as TRUE/FALSE, errors as their code (#DIV/0!), a formula's cached result
 * (the formula itself is not read). Charts, images and comments are not read. A workbook over
 * MAX_CELLS cells (counting the empty fields kept) fails with DOCUMENT_TOO_LARGE.
 */

const LABEL = 'XLSX workbook';
const WORKBOOK = 'xl/workbook.xml';
/** Cells of one workbook read at most: bounds the text of a huge sheet. */
export const MAX_XLSX_CELLS = 1_000_000;

type WholePages = Extract<OpenedBody, { kind: 'whole' }>['pages'];

/**
 * Streams through a large part (a sheet, the shared strings) with htmlparser2's XML mode instead
 * of building a tree: a sheet of a million cells is 34 MB of XML, which fast-xml-parser took 22 s
 * and 900 MB of heap to turn into objects, and this reads in about a second. Element names lose
 * their prefix. A part cut short (elements left open at its end) is DOCUMENT_CORRUPT.
 */
function streamXml(xml: string, part: string, handlers: { open?: (name: string, attributes: Record<string, string>) => void; text?: (text: string) => void; close?: (name: string) => void }): void {
  const local = (name: string): string => name.slice(name.indexOf(':') + 1);
  let ending = false;
  let cutShort = false;
  const parser = new Parser(
    {
      onopentag: (name, attributes) => handlers.open?.(local(name), attributes),
      ontext: (text) => handlers.text?.(text),
      onclosetag: (name) => {
        // Elements still open when the input ends are closed by end(): the part was cut short.
        if (ending) cutShort = true;
        handlers.close?.(local(name));
      },
    },
    { xmlMode: true, decodeEntities: true },
  );
  parser.write(xml);
  ending = true;
  parser.end();
  if (cutShort) throw new ShoalError(ErrorCode.DOCUMENT_CORRUPT, `the ${LABEL} is damaged: ${part} is not well-formed XML (elements left open at its end)`);
}

/** The shared strings: each item's text, or its rich-text runs' text, without phonetic runs (`rPh`). */
async function sharedStrings(archive: ZipArchive, workbookRels: Map<string, { type: string; part: string }>): Promise<string[]> {
  const part = [...workbookRels.values()].find((rel) => rel.type.endsWith('/sharedStrings'))?.part ?? 'xl/sharedStrings.xml';
  const xml = await archive.optionalText(part);
  if (xml === undefined) return [];
  const strings: string[] = [];
  let current: string | null = null;
  let inText = false;
  let phonetic = 0;
  streamXml(xml, part, {
    open: (name) => {
      if (name === 'si') current = '';
      else if (name === 'rPh') phonetic++;
      else if (name === 't' && phonetic === 0) inText = true;
    },
    text: (text) => {
      if (inText && current !== null) current += text;
    },
    close: (name) => {
      if (name === 't') inText = false;
      else if (name === 'rPh') phonetic--;
      else if (name === 'si' && current !== null) {
        strings.push(current);
        current = null;
      }
    },
  });
  return strings;
}

/** Zero-based column of a cell reference (`C7` → 2), or null. */
function columnOf(reference: string | undefined): number | null {
  const letters = reference === undefined ? null : /^([A-Z]{1,3})\d*$/.exec(reference)?.[1];
  if (letters === null || letters === undefined) return null;
  let column = 0;
  for (const letter of letters) column = column * 26 + (letter.charCodeAt(0) - 64);
  return column - 1;
}

interface Workbook {
  shared: readonly string[];
  dates: { styles: Map<number, DateStyle>; date1904: boolean };
}

/** A cell's value from its type (`t`), style (`s`) and raw text (its `<v>`, or an inline string's text). */
function cellValue(cell: { type: string; style: number }, raw: string, book: Workbook): string {
  if (cell.type === 's') return book.shared[Number.parseInt(raw, 10)] ?? '';
  if (cell.type === 'b') return raw === '1' ? 'TRUE' : raw === '0' ? 'FALSE' : raw;
  const date = cell.type === 'n' ? book.dates.styles.get(cell.style) : undefined;
  return (date === undefined ? null : serialToIso(raw, date, book.dates.date1904)) ?? raw;
}

class CellBudget {
  #used = 0;
  take(count: number): void {
    this.#used += count;
    if (this.#used > MAX_XLSX_CELLS) throw tooLarge('maxCells', this.#used, MAX_XLSX_CELLS, 'spreadsheet cells');
  }
}

function sheetLines(xml: string, part: string, book: Workbook, budget: CellBudget): string[] {
  const lines: string[] = [];
  let fields: string[] | null = null;
  let cell: { column: number | null; type: string; style: number } | null = null;
  let raw = '';
  let inValue = false;
  let phonetic = 0;
  streamXml(xml, part, {
    open: (name, attributes) => {
      if (name === 'row') fields = [];
      else if (name === 'c' && fields !== null) {
        cell = { column: columnOf(attributes.r), type: attributes.t ?? 'n', style: Number(attributes.s ?? 0) };
        raw = '';
      } else if (name === 'rPh') phonetic++;
      // The cached value (a formula's `<f>` is not read), or an inline string's text.
      else if (cell !== null && phonetic === 0 && (name === 'v' || (name === 't' && cell.type === 'inlineStr'))) inValue = true;
    },
    text: (text) => {
      if (inValue) raw += text;
    },
    close: (name) => {
      if (name === 'v' || name === 't') inValue = false;
      else if (name === 'rPh') phonetic--;
      else if (name === 'c' && cell !== null && fields !== null) {
        const value = cellValue(cell, raw, book).replace(/[\t\r\n]+/g, ' ').trim();
        if (value.length > 0) {
          const column = cell.column ?? fields.length;
          // Empty fields up to this cell keep the columns in place; they count against the budget too.
          budget.take(Math.max(1, column + 1 - fields.length));
          while (fields.length < column) fields.push('');
          fields[column] = value;
        }
        cell = null;
      } else if (name === 'row' && fields !== null) {
        if (fields.length > 0) lines.push(fields.join('\t'));
        fields = null;
      }
    },
  });
  return lines;
}

export const xlsxFormat = defineFormat({
  type: 'xlsx',
  sniff: { by: 'signature', match: zipContainer('xlsx', WORKBOOK, 'xlsx') },
  async open(bytes, { maxPages }) {
    const archive = await ZipArchive.open(bytes, LABEL);
    const workbook = await parseXml(await archive.text(WORKBOOK), LABEL, WORKBOOK);
    const rels = await relationships(archive, WORKBOOK, LABEL);
    const sheetList = child(workbook, 'sheets');
    const sheets = sheetList === undefined ? [] : descendants(sheetList, 'sheet');
    if (sheets.length === 0) throw new ShoalError(ErrorCode.DOCUMENT_EMPTY, `the ${LABEL} has no sheets`);
    if (sheets.length > maxPages) throw tooLarge('maxPages', sheets.length, maxPages, 'sheets');
    const date1904 = ['1', 'true'].includes(child(workbook, 'workbookPr')?.attributes.date1904 ?? '');
    const stylesPart = [...rels.values()].find((rel) => rel.type.endsWith('/styles'))?.part;
    const book: Workbook = { shared: await sharedStrings(archive, rels), dates: await dateStyles(archive, LABEL, stylesPart, date1904) };
    const budget = new CellBudget();
    const pages: WholePages = [];
    for (const [index, sheet] of sheets.entries()) {
      const name = (sheet.attributes.name ?? `Sheet ${index + 1}`).trim();
      const id = relationshipId(sheet.attributes);
      const part = id === undefined ? undefined : rels.get(id)?.part;
      if (part === undefined) throw new ShoalError(ErrorCode.DOCUMENT_CORRUPT, `the ${LABEL} is damaged: sheet "${name}" has no part`);
      // A chartsheet or dialog sheet has no cells: an empty page keeps the sheet numbering.
      const lines = sheetLines(await archive.text(part), part, book, budget);
      pages.push(lines.length === 0 ? { page: index + 1, text: '', headings: [] } : { page: index + 1, text: `${name}\n\n${lines.join('\n')}`, headings: [{ offset: 0, text: name }] });
    }
    return whole('xlsx', pages, await coreTitle(archive, LABEL));
  },
});
