import { createRequire } from 'node:module';
import ExcelJS from 'exceljs';
import JSZip from 'jszip';
import type PptxGenJSModule from 'pptxgenjs';
import { Document, FootnoteReferenceRun, HeadingLevel, Packer, Paragraph, TextRun } from 'docx';

/**
 * Real DOCX, PPTX, XLSX, EPUB and EML documents made in the test: DOCX by `docx`, PPTX by
 * `pptxgenjs`, XLSX by `exceljs` (three independent writers), EPUB 3 with jszip as the spec lays
 * it out (a stored `mimetype` first, META-INF/container.xml, an OPF package with a spine), EML as
 * RFC 5322 text. Each sample carries distinct phrases the tests look for.
 */

/**
 * pptxgenjs types its ES build as CommonJS, so TypeScript and Node disagree on what its default
 * import is; its CommonJS build (`module.exports = PptxGenJS`) is loaded instead.
 */
const PptxGenJS: typeof PptxGenJSModule.default = createRequire(import.meta.url)('pptxgenjs');

/** A Word document: a Heading 1, the first paragraph (with a footnote when given), a Heading 2, the other paragraphs. */
export async function makeDocx(options: { title?: string; heading: string; subheading: string; paragraphs: readonly string[]; footnote?: string }): Promise<Uint8Array> {
  const doc = new Document({
    ...(options.title === undefined ? {} : { title: options.title }),
    ...(options.footnote === undefined ? {} : { footnotes: { 1: { children: [new Paragraph(options.footnote)] } } }),
    sections: [
      {
        children: [
          new Paragraph({ text: options.heading, heading: HeadingLevel.HEADING_1 }),
          new Paragraph({ children: [new TextRun(options.paragraphs[0] ?? ''), ...(options.footnote === undefined ? [] : [new FootnoteReferenceRun(1)])] }),
          new Paragraph({ text: options.subheading, heading: HeadingLevel.HEADING_2 }),
          ...options.paragraphs.slice(1).map((text) => new Paragraph({ children: [new TextRun({ text, bold: text.length % 2 === 0 })] })),
        ],
      },
    ],
  });
  return new Uint8Array(await Packer.toBuffer(doc));
}

export interface SlideSpec {
  title: string;
  body: readonly string[];
  notes?: string;
  /** A table below the body, rows of cell texts. */
  table?: readonly (readonly string[])[];
}

export async function makePptx(slides: readonly SlideSpec[]): Promise<Uint8Array> {
  const pptx = new PptxGenJS();
  pptx.defineSlideMaster({ title: 'TITLED', objects: [{ placeholder: { options: { name: 'title', type: 'title', x: 0.5, y: 0.3, w: 9, h: 1 }, text: '' } }] });
  for (const spec of slides) {
    const slide = pptx.addSlide({ masterName: 'TITLED' });
    slide.addText(spec.title, { placeholder: 'title' });
    slide.addText(spec.body.map((line) => ({ text: line, options: { breakLine: true } })), { x: 0.5, y: 1.5, w: 9, h: 3 });
    if (spec.table !== undefined) slide.addTable(spec.table.map((row) => row.map((text) => ({ text }))), { x: 0.5, y: 4.6, w: 9 });
    if (spec.notes !== undefined) slide.addNotes(spec.notes);
  }
  const out = await pptx.write({ outputType: 'uint8array' });
  if (!(out instanceof Uint8Array)) throw new TypeError('pptxgenjs did not write bytes');
  return out;
}

export async function makeXlsx(sheets: readonly { name: string; rows: readonly (readonly (string | number | boolean | Date | null)[])[] }[]): Promise<Uint8Array> {
  const workbook = new ExcelJS.Workbook();
  for (const spec of sheets) {
    const sheet = workbook.addWorksheet(spec.name);
    for (const row of spec.rows) sheet.addRow([...row]);
  }
  return new Uint8Array(await workbook.xlsx.writeBuffer());
}

export interface ChapterSpec {
  file: string;
  title: string;
  paragraphs: readonly string[];
}

const xhtml = (chapter: ChapterSpec): string =>
  `<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops"><head><title>${chapter.title}</title></head>` +
  `<body><section><h1>${chapter.title}</h1>${chapter.paragraphs.map((text) => `<p>${text}</p>`).join('')}</section></body></html>`;

/** An EPUB 3 book; `spineOrder` lists chapter files in reading order (the manifest keeps `chapters` order). */
export async function makeEpub(options: { title: string; chapters: readonly ChapterSpec[]; spineOrder?: readonly string[] }): Promise<Uint8Array> {
  const zip = new JSZip();
  // The spec: `mimetype` first and stored, so the file's bytes 30.. read "mimetypeapplication/epub+zip".
  zip.file('mimetype', 'application/epub+zip', { compression: 'STORE' });
  zip.file(
    'META-INF/container.xml',
    '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>',
  );
  const ids = new Map(options.chapters.map((chapter, index) => [chapter.file, `c${index + 1}`]));
  const manifest = options.chapters.map((chapter) => `<item id="${ids.get(chapter.file) ?? ''}" href="text/${chapter.file}" media-type="application/xhtml+xml"/>`).join('');
  const spine = (options.spineOrder ?? options.chapters.map((chapter) => chapter.file)).map((file) => `<itemref idref="${ids.get(file) ?? ''}"/>`).join('');
  zip.file(
    'OEBPS/content.opf',
    `<?xml version="1.0" encoding="UTF-8"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="uid"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">` +
      `<dc:identifier id="uid">urn:uuid:12345678-1234-1234-1234-123456789abc</dc:identifier><dc:title>${options.title}</dc:title><dc:language>en</dc:language></metadata>` +
      `<manifest><item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>${manifest}</manifest><spine>${spine}</spine></package>`,
  );
  zip.file('OEBPS/nav.xhtml', '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><body><nav><ol><li>Contents</li></ol></nav></body></html>');
  for (const chapter of options.chapters) zip.file(`OEBPS/text/${chapter.file}`, xhtml(chapter));
  return zip.generateAsync({ type: 'uint8array', compression: 'DEFLATE', mimeType: 'application/epub+zip' });
}

/** A plain-text email (RFC 5322, CRLF line ends). */
export function makeEml(options: { subject: string; from: string; to: string; date: string; body: string }): Uint8Array {
  const lines = [
    `From: ${options.from}`,
    `To: ${options.to}`,
    `Subject: ${options.subject}`,
    `Date: ${options.date}`,
    'Message-ID: <sample-1@example.org>',
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    'Content-Transfer-Encoding: 8bit',
    '',
    options.body,
  ];
  return new TextEncoder().encode(lines.join('\r\n'));
}

/** A multipart/alternative email: a text part and an HTML part with headings, and an attachment. */
export function makeAlternativeEml(options: { subject: string; text: string; html: string; attachmentText: string }): Uint8Array {
  const boundary = 'b1_alternative';
  const outer = 'b0_mixed';
  const lines = [
    'From: Ada Lovelace <ada@example.org>',
    'To: Charles Babbage <charles@example.org>',
    `Subject: ${options.subject}`,
    'Date: Tue, 03 Mar 2026 09:30:00 +0000',
    'Message-ID: <sample-2@example.org>',
    'MIME-Version: 1.0',
    `Content-Type: multipart/mixed; boundary="${outer}"`,
    '',
    `--${outer}`,
    `Content-Type: multipart/alternative; boundary="${boundary}"`,
    '',
    `--${boundary}`,
    'Content-Type: text/plain; charset=utf-8',
    '',
    options.text,
    `--${boundary}`,
    'Content-Type: text/html; charset=utf-8',
    '',
    options.html,
    `--${boundary}--`,
    `--${outer}`,
    'Content-Type: text/plain; name="attached.txt"',
    'Content-Disposition: attachment; filename="attached.txt"',
    'Content-Transfer-Encoding: base64',
    '',
    Buffer.from(options.attachmentText).toString('base64'),
    `--${outer}--`,
    '',
  ];
  return new TextEncoder().encode(lines.join('\r\n'));
}
