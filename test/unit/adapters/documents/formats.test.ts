import JSZip from 'jszip';
import { describe, expect, it } from 'vitest';
import type { FormatOpened } from '../../../../adapters/documents/formats/format.js';
import { FORMATS, formatOf } from '../../../../adapters/documents/formats/registry.js';
import { MAX_XLSX_CELLS } from '../../../../adapters/documents/formats/xlsx.js';
import { serialToIso } from '../../../../adapters/documents/formats/xlsx-dates.js';
import { parseXml, textOf } from '../../../../adapters/documents/formats/xml.js';
import { ZipArchive } from '../../../../adapters/documents/formats/zip-archive.js';
import { sniffDocument } from '../../../../adapters/documents/sniff.js';
import { DOCUMENT_TYPES } from '../../../../adapters/protocol/document-types.js';
import { ErrorCode, hasErrorCode } from '../../../../adapters/protocol/errors.js';
import { StoredPages } from '../../../../adapters/protocol/ingest.js';
import { makeAlternativeEml, makeDocx, makeEml, makeEpub, makePptx, makeXlsx } from '../../../helpers/document-samples.js';

/**
 * The document formats read from real files made here (docx, pptxgenjs and exceljs write the
 * Office files, jszip the EPUB per the EPUB 3 layout, the emails are RFC 5322 text): their text,
 * headings, pages and titles; sniffing by content whatever the name; a truncated, damaged,
 * encrypted or bomb-like file failing with its own code.
 */

const LIMITS = { maxBytes: 100 * 1024 * 1024, maxPages: 5000 };

async function read(bytes: Uint8Array, name: string, limits: Partial<typeof LIMITS> = {}): Promise<FormatOpened['body']> {
  const sniffed = sniffDocument(bytes, name);
  return (await formatOf(sniffed.type).open(bytes, { name, sniffed, ...LIMITS, ...limits })).body;
}

function pagesOf(body: FormatOpened['body']): { page: number; text: string; headings: { offset: number; text: string }[] }[] {
  if (body.kind !== 'whole') throw new Error(`expected a whole document, got ${body.kind}`);
  return body.pages;
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a failure');
}

/** Every heading's text sits at its offset in the page text. */
function expectHeadingsInPlace(pages: ReturnType<typeof pagesOf>): void {
  for (const page of pages) for (const heading of page.headings) expect(page.text.slice(heading.offset, heading.offset + heading.text.length)).toBe(heading.text);
}

/** A ZIP rewritten by `edit` (members replaced or added), as jszip writes it. */
async function rezip(bytes: Uint8Array, edit: (zip: JSZip) => void): Promise<Uint8Array> {
  const zip = await JSZip.loadAsync(bytes);
  edit(zip);
  return zip.generateAsync({ type: 'uint8array', compression: 'DEFLATE' });
}

const docx = makeDocx({
  title: 'Harbour Handbook',
  heading: 'Tides of the harbour',
  subheading: 'Mooring in a gale',
  paragraphs: ['The harbour floods at noon on spring tides.', 'Double the mooring lines when the glass falls.', 'Keep clear of the breakwater at night.'],
  footnote: 'Tide tables of 1987.',
});
const pptx = makePptx([
  { title: 'Quarterly lighthouse review', body: ['Lamp hours rose by a tenth', 'Two keepers retired'], notes: 'Mention the fog signal budget' },
  { title: 'Fog signals', body: ['Diaphone replaced by electric horn'], table: [['Station', 'Signal'], ['North Head', 'Horn 2 blasts']] },
  { title: 'Next steps', body: ['Paint the gallery rail'] },
]);
const xlsx = makeXlsx([
  { name: 'Stores', rows: [['Item', 'Count', 'Checked'], ['Lamp oil', 42, true], ['Wick', 3.5, false], [null, null, 'spare column']] },
  { name: 'Keepers', rows: [['Name', 'Since'], ['Grace Darling', 1834]] },
]);
const epub = makeEpub({
  title: 'Tales of the Breakwater',
  chapters: [
    { file: 'one.xhtml', title: 'The first storm', paragraphs: ['Waves broke over the seawall at dawn.'] },
    { file: 'two.xhtml', title: 'The rescue', paragraphs: ['A rowing boat reached the wreck before noon.'] },
    { file: 'three.xhtml', title: 'Calm water', paragraphs: ['The harbour was still by evening.'] },
  ],
  spineOrder: ['two.xhtml', 'one.xhtml', 'three.xhtml'],
});

describe('the formats registry', () => {
  it('has exactly one format per document type, and the stored pages accept every type', () => {
    expect(FORMATS.map((format) => format.type).sort()).toEqual([...DOCUMENT_TYPES].sort());
    for (const type of DOCUMENT_TYPES) expect(StoredPages.shape.type.safeParse(type).success).toBe(true);
    expect(StoredPages.shape.type.safeParse('doc').success).toBe(false);
  });
});

describe('sniffing from the first 8 KiB (the gateway checks an upload by its head)', () => {
  it('tells each ZIP format from its local headers, with or without a telling name', async () => {
    const samples: [string, Promise<Uint8Array>][] = [['docx', docx], ['pptx', pptx], ['xlsx', xlsx], ['epub', epub]];
    for (const [type, sample] of samples) {
      const head = (await sample).subarray(0, 8192);
      expect(sniffDocument(head, `upload.${type}`), type).toEqual({ type });
      expect(sniffDocument(head, 'upload'), type).toEqual({ type });
    }
  });
});

describe('DOCX', () => {
  it('reads the text through HTML, with Heading 1/2 styles as headings and the core title', async () => {
    const body = await read(await docx, 'handbook.docx');
    const pages = pagesOf(body);
    expect(pages).toHaveLength(1);
    expect(pages[0]?.text).toContain('The harbour floods at noon on spring tides.');
    expect(pages[0]?.text).toContain('Keep clear of the breakwater at night.');
    // The footnote at the end, without mammoth's back-link arrow.
    expect(pages[0]?.text.endsWith('Tide tables of 1987.')).toBe(true);
    expect(pages[0]?.text).not.toContain('↑');
    expect(pages[0]?.headings.map((heading) => heading.text)).toEqual(['Tides of the harbour', 'Mooring in a gale']);
    expectHeadingsInPlace(pages);
    expect(body.title).toBe('Harbour Handbook');
  });

  it('is told by its content under any name; a truncated or damaged one is DOCUMENT_CORRUPT', async () => {
    const bytes = await docx;
    expect(sniffDocument(bytes, 'report.pdf')).toEqual({ type: 'docx' });
    expect(sniffDocument(bytes, 'noname')).toEqual({ type: 'docx' });
    // Cut in half: the central directory is gone; the name (or a word/ member) still says DOCX.
    const truncated = bytes.subarray(0, Math.floor(bytes.length / 2));
    expect(sniffDocument(truncated, 'handbook.docx')).toEqual({ type: 'docx' });
    const cut = await failure(read(truncated, 'handbook.docx'));
    expect(hasErrorCode(cut, ErrorCode.DOCUMENT_CORRUPT)).toBe(true);
    expect(String(cut)).toMatch(/DOCX document is damaged.*truncated/);
    const damaged = await rezip(bytes, (zip) => zip.file('word/document.xml', '<w:document><w:body><w:p>unclosed'));
    const unclosed = await failure(read(damaged, 'handbook.docx'));
    expect(hasErrorCode(unclosed, ErrorCode.DOCUMENT_CORRUPT)).toBe(true);
    // The malformed part is named (docs/ingest.md), not mammoth's xmldom message with no part and no line.
    expect(String(unclosed)).toContain('the DOCX document is damaged: word/document.xml is not well-formed XML (unclosed tags w:document, w:body, w:p)');
    expect(String(unclosed)).not.toMatch(/xmldom|undefined/);
  });

  it('names the malformed part mammoth failed on, whichever it is, and says the XML is malformed', async () => {
    const bytes = await docx;
    // xmldom lets a mismatched end tag through; mammoth then fails with "Could not find the body element".
    const mismatched = await rezip(bytes, (zip) => zip.file('word/document.xml', '<w:document xmlns:w="urn:w"><w:body></w:p></w:body></w:document>'));
    const styles = await rezip(bytes, (zip) => zip.file('word/styles.xml', '<w:styles><w:style'));
    for (const [damaged, part] of [[mismatched, 'word/document.xml'], [styles, 'word/styles.xml']] as const) {
      const error = await failure(read(damaged, 'handbook.docx'));
      expect(hasErrorCode(error, ErrorCode.DOCUMENT_CORRUPT)).toBe(true);
      expect(String(error)).toContain(`the DOCX document is damaged: ${part} is not well-formed XML (`);
      expect(String(error)).not.toMatch(/xmldom|body element/);
    }
  });

  it('refuses a member that inflates past the per-member budget before mammoth reads it (DOCUMENT_TOO_LARGE)', async () => {
    // 65 MiB of zeros deflate to about 64 KiB.
    const bomb = await rezip(await docx, (zip) => zip.file('word/media/zeros.bin', new Uint8Array(65 * 1024 * 1024)));
    expect(bomb.length).toBeLessThan(1024 * 1024);
    const error = await failure(read(bomb, 'bomb.docx'));
    expect(hasErrorCode(error, ErrorCode.DOCUMENT_TOO_LARGE)).toBe(true);
    expect(String(error)).toMatch(/word\/media\/zeros\.bin/);
  }, 30_000);
});

describe('PPTX', () => {
  it('gives one page per slide in slide order, the title placeholder as heading, the body and the speaker notes', async () => {
    const body = await read(await pptx, 'review.pptx');
    // pptxgenjs's default core title ("PptxGenJS Presentation") names the tool: the first slide's title is taken.
    expect(body.title).toBe('Quarterly lighthouse review');
    const pages = pagesOf(body);
    expect(pages.map((page) => page.page)).toEqual([1, 2, 3]);
    expect(pages.map((page) => page.headings.map((heading) => heading.text))).toEqual([['Quarterly lighthouse review'], ['Fog signals'], ['Next steps']]);
    expect(pages[0]?.text).toBe('Quarterly lighthouse review\n\nLamp hours rose by a tenth\nTwo keepers retired\n\nMention the fog signal budget');
    expect(pages[1]?.text).toBe('Fog signals\n\nDiaphone replaced by electric horn\n\nStation\tSignal\nNorth Head\tHorn 2 blasts');
    expect(pages[2]?.text).toContain('Paint the gallery rail');
    expectHeadingsInPlace(pages);
  });

  it('follows the slide list, not the file names: slides reordered in presentation.xml come out reordered', async () => {
    const bytes = await pptx;
    const zip = await JSZip.loadAsync(bytes);
    const presentation = await zip.file('ppt/presentation.xml')?.async('string');
    const list = /<p:sldIdLst>(.*?)<\/p:sldIdLst>/.exec(presentation ?? '');
    const ids = [...(list?.[1] ?? '').matchAll(/<p:sldId [^>]*\/>/g)].map((match) => match[0]);
    expect(ids).toHaveLength(3);
    const reordered = await rezip(bytes, (edit) => edit.file('ppt/presentation.xml', (presentation ?? '').replace(list?.[1] ?? '', [ids[2], ids[0], ids[1]].join(''))));
    const pages = pagesOf(await read(reordered, 'reordered.pptx'));
    expect(pages.map((page) => page.headings[0]?.text)).toEqual(['Next steps', 'Quarterly lighthouse review', 'Fog signals']);
  });

  it('is told by content under a wrong name; truncated is DOCUMENT_CORRUPT; more slides than maxPages is DOCUMENT_TOO_LARGE', async () => {
    const bytes = await pptx;
    expect(sniffDocument(bytes, 'slides.xlsx')).toEqual({ type: 'pptx' });
    expect(hasErrorCode(await failure(read(bytes.subarray(0, bytes.length - 200), 'review.pptx')), ErrorCode.DOCUMENT_CORRUPT)).toBe(true);
    expect(hasErrorCode(await failure(read(bytes, 'review.pptx', { maxPages: 2 })), ErrorCode.DOCUMENT_TOO_LARGE)).toBe(true);
  });
});

describe('XLSX', () => {
  it('gives one page per sheet: its name as heading, rows as tab-separated lines, strings, numbers and booleans', async () => {
    const pages = pagesOf(await read(await xlsx, 'stores.xlsx'));
    expect(pages).toHaveLength(2);
    expect(pages[0]?.text).toBe('Stores\n\nItem\tCount\tChecked\nLamp oil\t42\tTRUE\nWick\t3.5\tFALSE\n\t\tspare column');
    expect(pages[1]?.text).toBe('Keepers\n\nName\tSince\nGrace Darling\t1834');
    expect(pages.map((page) => page.headings)).toEqual([[{ offset: 0, text: 'Stores' }], [{ offset: 0, text: 'Keepers' }]]);
  });

  it('writes a number whose cell format shows a date or time as ISO 8601, other numbers as stored', async () => {
    const bytes = await makeXlsx([{ name: 'Log', rows: [['Launched', new Date(Date.UTC(2026, 2, 3)), new Date(Date.UTC(2026, 2, 3, 14, 30)), 1234.5]] }]);
    // exceljs gives both dates the built-in format 14 (a date without its time), so both show as Excel shows them.
    expect(pagesOf(await read(bytes, 'log.xlsx'))[0]?.text).toBe('Log\n\nLaunched\t2026-03-03\t2026-03-03\t1234.5');
    expect(serialToIso('46084.604166666667', { date: true, time: true }, false)).toBe('2026-03-03 14:30:00');
    expect(serialToIso('46084', { date: true, time: false }, false)).toBe('2026-03-03');
    expect(serialToIso('1', { date: true, time: false }, false)).toBe('1900-01-01');
    expect(serialToIso('0', { date: true, time: false }, true)).toBe('1904-01-01');
    expect(serialToIso('1.5', { date: false, time: true }, false)).toBe('36:00:00');
    expect(serialToIso('not a number', { date: true, time: false }, false)).toBeNull();
  });

  it('reads inline strings and rich-text shared strings (phonetic runs left out)', async () => {
    const bytes = await rezip(await xlsx, (zip) => {
      zip.file('xl/sharedStrings.xml', '<?xml version="1.0"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><si><r><t>Rich </t></r><r><rPr><b/></rPr><t>text &amp; more</t></r><rPh><t>PHONETIC</t></rPh></si></sst>');
      zip.file(
        'xl/worksheets/sheet2.xml',
        '<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1"><c r="A1" t="s"><v>0</v></c><c r="C1" t="inlineStr"><is><t>inline words</t></is></c><c r="D1" t="e"><v>#DIV/0!</v></c></row></sheetData></worksheet>',
      );
    });
    const pages = pagesOf(await read(bytes, 'rich.xlsx'));
    expect(pages[1]?.text).toBe('Keepers\n\nRich text & more\t\tinline words\t#DIV/0!');
  });

  it(`is bounded: a sheet over ${MAX_XLSX_CELLS} cells (empty fields kept between values count) is DOCUMENT_TOO_LARGE`, async () => {
    // 70 rows with a value in A and in XFD (column 16384): 70 × 16384 fields.
    const rows = Array.from({ length: 70 }, (_, i) => `<row r="${i + 1}"><c r="A${i + 1}"><v>${i}</v></c><c r="XFD${i + 1}"><v>${i}</v></c></row>`).join('');
    const wide = await rezip(await xlsx, (zip) => zip.file('xl/worksheets/sheet1.xml', `<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>${rows}</sheetData></worksheet>`));
    const error = await failure(read(wide, 'wide.xlsx'));
    expect(hasErrorCode(error, ErrorCode.DOCUMENT_TOO_LARGE)).toBe(true);
    expect(String(error)).toMatch(/maxCells/);
  });

  it('is told by content under a wrong name; a sheet part that is not XML is DOCUMENT_CORRUPT', async () => {
    expect(sniffDocument(await xlsx, 'numbers.csv')).toEqual({ type: 'xlsx' });
    const damaged = await rezip(await xlsx, (zip) => zip.file('xl/worksheets/sheet1.xml', '<worksheet><sheetData><row>'));
    const error = await failure(read(damaged, 'stores.xlsx'));
    expect(hasErrorCode(error, ErrorCode.DOCUMENT_CORRUPT)).toBe(true);
    expect(String(error)).toMatch(/XLSX workbook is damaged: xl\/worksheets\/sheet1\.xml/);
  });
});

describe('EPUB', () => {
  it('gives one page per spine item in spine order, chapter headings kept, the OPF title', async () => {
    const body = await read(await epub, 'tales.epub');
    const pages = pagesOf(body);
    expect(pages.map((page) => page.headings.map((heading) => heading.text))).toEqual([['The rescue'], ['The first storm'], ['Calm water']]);
    expect(pages[0]?.text).toBe('The rescue\n\nA rowing boat reached the wreck before noon.');
    expect(pages[1]?.text).toContain('Waves broke over the seawall at dawn.');
    expectHeadingsInPlace(pages);
    expect(body.title).toBe('Tales of the Breakwater');
  });

  it('is told by its stored mimetype even in the first bytes alone; a missing chapter or package is DOCUMENT_CORRUPT', async () => {
    const bytes = await epub;
    expect(sniffDocument(bytes, 'book.zip')).toEqual({ type: 'epub' });
    expect(sniffDocument(bytes.subarray(0, 100), 'upload')).toEqual({ type: 'epub' });
    const noChapter = await rezip(bytes, (zip) => zip.remove('OEBPS/text/two.xhtml'));
    const error = await failure(read(noChapter, 'tales.epub'));
    expect(hasErrorCode(error, ErrorCode.DOCUMENT_CORRUPT)).toBe(true);
    expect(String(error)).toMatch(/EPUB book is damaged: it has no OEBPS\/text\/two\.xhtml/);
    const noPackage = await rezip(bytes, (zip) => zip.remove('OEBPS/content.opf'));
    expect(hasErrorCode(await failure(read(noPackage, 'tales.epub')), ErrorCode.DOCUMENT_CORRUPT)).toBe(true);
  });
});

describe('EML', () => {
  const plain = makeEml({ subject: 'Harbour meeting moved', from: 'Ada <ada@example.org>', to: 'Bob <bob@example.org>', date: 'Tue, 03 Mar 2026 09:30:00 +0000', body: 'We meet at the lighthouse.\r\nBring the tide charts.' });

  it('reads the subject as heading and title, sender, recipients and date as header lines, then the body', async () => {
    const body = await read(plain, 'meeting.eml');
    const pages = pagesOf(body);
    expect(pages).toHaveLength(1);
    expect(pages[0]?.text).toBe('Harbour meeting moved\n\nFrom: "Ada" <ada@example.org>\nTo: "Bob" <bob@example.org>\nDate: 2026-03-03T09:30:00.000Z\n\nWe meet at the lighthouse.\nBring the tide charts.');
    expect(pages[0]?.headings).toEqual([{ offset: 0, text: 'Harbour meeting moved' }]);
    expect(body.title).toBe('Harbour meeting moved');
  });

  it('multipart/alternative: the text part is read, the HTML alternative and the attachment are not', async () => {
    const mail = makeAlternativeEml({ subject: 'Ferry news', text: 'The ferry runs again from Monday.', html: '<html><body><h1>Ferry news</h1><p>HTML-only sentence.</p></body></html>', attachmentText: 'attachment secret words' });
    const text = pagesOf(await read(mail, 'ferry.eml'))[0]?.text ?? '';
    expect(text).toContain('The ferry runs again from Monday.');
    expect(text).not.toContain('HTML-only sentence');
    expect(text).not.toContain('attachment secret words');
  });

  it('an HTML-only email is read as HTML: its headings kept at their offsets', async () => {
    const mail = makeAlternativeEml({ subject: 'Timetable', text: '', html: '<html><body><h2>Winter timetable</h2><p>Boats leave hourly.</p></body></html>', attachmentText: 'x' });
    const pages = pagesOf(await read(mail, 'timetable.eml'));
    expect(pages[0]?.headings.map((heading) => heading.text)).toEqual(['Timetable', 'Winter timetable']);
    expect(pages[0]?.text).toContain('Boats leave hourly.');
    expectHeadingsInPlace(pages);
  });

  it('is told by its header block under any name, not from text that merely has a From: line', () => {
    expect(sniffDocument(plain, 'notes.txt')).toEqual({ type: 'eml' });
    expect(sniffDocument(plain, 'notes.md')).toEqual({ type: 'eml' });
    expect(sniffDocument(new TextEncoder().encode('From: the editor\n\nSome prose follows.'), 'letter.txt')).toEqual({ type: 'text' });
    expect(sniffDocument(new TextEncoder().encode('# Title\nFrom: x\nDate: y\n'), 'a.md')).toEqual({ type: 'markdown' });
  });

  it('an email cut inside its header block (no subject, no body) is DOCUMENT_EMPTY', async () => {
    const cut = new TextEncoder().encode('From: Ada <ada@example.org>\r\nTo: Bob <bob@example.org>\r\nDate: Tue, 03 Mar 2026 09:30:00 +0000\r\nMessage-ID: <x@y>\r\nMIME-Ver');
    expect(sniffDocument(cut, 'cut.eml')).toEqual({ type: 'eml' });
    expect(hasErrorCode(await failure(read(cut, 'cut.eml')), ErrorCode.DOCUMENT_EMPTY)).toBe(true);
  });
});

describe('XML parts', () => {
  it('a "billion laughs" part does not grow: nested entity references stay unexpanded', async () => {
    const levels = Array.from({ length: 6 }, (_, level) => (level === 0 ? '<!ENTITY lol0 "lol">' : `<!ENTITY lol${level} "${`&lol${level - 1};`.repeat(10)}">`)).join('');
    const part = `<?xml version="1.0"?><!DOCTYPE lolz [${levels}]><a>${'&lol5;'.repeat(100)}</a>`;
    const root = await parseXml(part, 'test document', 'bomb.xml');
    // Expanded, it would be 10^5 × 3 × 100 = 30 million characters.
    expect(textOf(root).length).toBeLessThan(10_000);
  });
});

describe('ZIP bounds and encryption', () => {
  it('counts inflated bytes per member and per archive, and members before listing them', async () => {
    const zip = new JSZip();
    for (let i = 0; i < 6; i++) zip.file(`part${i}.xml`, 'x'.repeat(900));
    const bytes = await zip.generateAsync({ type: 'uint8array', compression: 'DEFLATE' });
    const tooMany = await failure(ZipArchive.open(bytes, 'test archive', { maxEntries: 5, maxEntryBytes: 1000, maxTotalBytes: 10_000 }));
    expect(hasErrorCode(tooMany, ErrorCode.DOCUMENT_TOO_LARGE)).toBe(true);
    expect(String(tooMany)).toMatch(/6 ZIP members/);
    const small = await ZipArchive.open(bytes, 'test archive', { maxEntries: 10, maxEntryBytes: 800, maxTotalBytes: 10_000 });
    expect(hasErrorCode(await failure(small.bytes('part0.xml')), ErrorCode.DOCUMENT_TOO_LARGE)).toBe(true);
    const total = await ZipArchive.open(bytes, 'test archive', { maxEntries: 10, maxEntryBytes: 1000, maxTotalBytes: 2000 });
    expect((await total.bytes('part0.xml')).length).toBe(900);
    expect((await total.bytes('part1.xml')).length).toBe(900);
    expect(hasErrorCode(await failure(total.bytes('part2.xml')), ErrorCode.DOCUMENT_TOO_LARGE)).toBe(true);
  });

  it('a ZIP with encrypted members is DOCUMENT_ENCRYPTED; an encrypted Office file (OLE2 EncryptedPackage) too', async () => {
    const bytes = new Uint8Array(await docx);
    // Set the "encrypted" flag (bit 0 of the general purpose flags) in every local and central header.
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (let at = 0; at + 4 <= bytes.length; at++) {
      const signature = view.getUint32(at, true);
      if (signature === 0x04034b50) view.setUint16(at + 6, view.getUint16(at + 6, true) | 1, true);
      if (signature === 0x02014b50) view.setUint16(at + 8, view.getUint16(at + 8, true) | 1, true);
    }
    expect(hasErrorCode(await failure(read(bytes, 'locked.docx')), ErrorCode.DOCUMENT_ENCRYPTED)).toBe(true);
    const ole = new Uint8Array(4096);
    ole.set([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]);
    ole.set(Buffer.from('EncryptedPackage', 'utf16le'), 1024);
    let refused: unknown = null;
    try {
      sniffDocument(ole, 'locked.xlsx');
    } catch (error) {
      refused = error;
    }
    expect(hasErrorCode(refused, ErrorCode.DOCUMENT_ENCRYPTED)).toBe(true);
  });
});
