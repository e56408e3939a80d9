import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { defineFormat, tooLarge, whole, type OpenedBody } from './format.js';
import { coreTitle, relationshipId, relationships, zipContainer } from './ooxml.js';
import { child, children, descendants, isElement, parseXml, textOf, type XmlElement } from './xml.js';
import { ZipArchive } from './zip-archive.js';

/**
 * XLSX (Excel): a ZIP holding xl/workbook.xml. One page per sheet in workbook order (hidden
 * sheets included): the sheet's name as its first line and heading, then one line per row that
 * has a value, its cells joined by a tab, an empty cell between two values kept as an empty
 * field so columns stay in place. Values as stored: shared and inline strings (phonetic runs
 * left out), numbers as written in the file (a date is its serial number, no number format is
 * applied), booleans as TRUE/FALSE, errors as their code (#DIV/0!), a formula's cached result
 * (the formula itself is not read). Charts, images and comments are not read. A workbook over
 * MAX_CELLS cells (counting the empty fields kept) fails with DOCUMENT_TOO_LARGE.
 */

const LABEL = 'XLSX workbook';
const WORKBOOK = 'xl/workbook.xml';
/** Cells of one workbook read at most: bounds the text of a huge sheet. */
export const MAX_XLSX_CELLS = 1_000_000;

type WholePages = Extract<OpenedBody, { kind: 'whole' }>['pages'];

/** A string item (`si`, `is`): its text, or its rich-text runs' text, without phonetic runs (`rPh`). */
function stringItem(item: XmlElement): string {
  return item.children
    .map((node) => {
      if (!isElement(node)) return '';
      if (node.name === 't') return textOf(node);
      if (node.name === 'r') return children(node, 't').map(textOf).join('');
      return '';
    })
    .join('');
}

async function sharedStrings(archive: ZipArchive, workbookRels: Map<string, { type: string; part: string }>): Promise<string[]> {
  const part = [...workbookRels.values()].find((rel) => rel.type.endsWith('/sharedStrings'))?.part ?? 'xl/sharedStrings.xml';
  const text = await archive.optionalText(part);
  if (text === undefined) return [];
  return children(await parseXml(text, LABEL, part), 'si').map(stringItem);
}

/** Zero-based column of a cell reference (`C7` → 2), or null. */
function columnOf(reference: string | undefined): number | null {
  const letters = reference === undefined ? null : /^([A-Z]{1,3})\d*$/.exec(reference)?.[1];
  if (letters === null || letters === undefined) return null;
  let column = 0;
  for (const letter of letters) column = column * 26 + (letter.charCodeAt(0) - 64);
  return column - 1;
}

function cellValue(cell: XmlElement, shared: readonly string[]): string {
  const type = cell.attributes.t ?? 'n';
  if (type === 'inlineStr') {
    const inline = child(cell, 'is');
    return inline === undefined ? '' : stringItem(inline);
  }
  const valueElement = child(cell, 'v');
  const value = valueElement === undefined ? '' : textOf(valueElement);
  if (type === 's') return shared[Number.parseInt(value, 10)] ?? '';
  if (type === 'b') return value === '1' ? 'TRUE' : value === '0' ? 'FALSE' : value;
  return value;
}

class CellBudget {
  #used = 0;
  take(count: number): void {
    this.#used += count;
    if (this.#used > MAX_XLSX_CELLS) throw tooLarge('maxCells', this.#used, MAX_XLSX_CELLS, 'spreadsheet cells');
  }
}

function sheetLines(sheet: XmlElement, shared: readonly string[], budget: CellBudget): string[] {
  const data = child(sheet, 'sheetData');
  if (data === undefined) return [];
  const lines: string[] = [];
  for (const row of children(data, 'row')) {
    const fields: string[] = [];
    for (const cell of children(row, 'c')) {
      const value = cellValue(cell, shared).replace(/[\t\r\n]+/g, ' ').trim();
      if (value.length === 0) continue;
      const column = columnOf(cell.attributes.r) ?? fields.length;
      // Empty fields up to this cell keep the columns in place; they count against the budget too.
      budget.take(Math.max(1, column + 1 - fields.length));
      while (fields.length < column) fields.push('');
      fields[column] = value;
    }
    if (fields.length > 0) lines.push(fields.join('\t'));
  }
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
    const shared = await sharedStrings(archive, rels);
    const budget = new CellBudget();
    const pages: WholePages = [];
    for (const [index, sheet] of sheets.entries()) {
      const name = (sheet.attributes.name ?? `Sheet ${index + 1}`).trim();
      const id = relationshipId(sheet.attributes);
      const part = id === undefined ? undefined : rels.get(id)?.part;
      if (part === undefined) throw new ShoalError(ErrorCode.DOCUMENT_CORRUPT, `the ${LABEL} is damaged: sheet "${name}" has no part`);
      // A chartsheet or dialog sheet has no cells: an empty page keeps the sheet numbering.
      const lines = sheetLines(await parseXml(await archive.text(part), LABEL, part), shared, budget);
      pages.push(lines.length === 0 ? { page: index + 1, text: '', headings: [] } : { page: index + 1, text: `${name}\n\n${lines.join('\n')}`, headings: [{ offset: 0, text: name }] });
    }
    return whole('xlsx', pages, await coreTitle(archive, LABEL));
  },
});
