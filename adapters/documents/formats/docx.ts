import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { htmlText } from '../html-reader.js';
import { requireText } from '../text-reader.js';
import { defineFormat, whole } from './format.js';
import { coreTitle, zipContainer } from './ooxml.js';
import { ZipArchive } from './zip-archive.js';

/**
 * DOCX (Word): a ZIP holding word/document.xml. mammoth turns it into HTML (headings from the
 * Heading 1-6 styles become <h1>..<h6>), read as any HTML page, so headings become chunk headings.
 * One page (a Word file has no fixed pages); footnotes and endnotes at its end, as mammoth puts
 * them. Images are skipped, not read; comments, headers and footers are not part of mammoth's body. Title: docProps/core.xml's dc:title, else the first heading.
 */

const LABEL = 'DOCX document';

export const docxFormat = defineFormat({
  type: 'docx',
  sniff: { by: 'signature', match: zipContainer('docx', 'word/document.xml', 'docx') },
  async open(bytes) {
    const archive = await ZipArchive.open(bytes, LABEL);
    // mammoth inflates what it reads itself: every member is first inflated here within the budget.
    await archive.checkAll();
    const { default: mammoth } = await import('mammoth');
    let html: string;
    try {
      // Images are never read, and a document may not make mammoth open files or URLs it links to.
      const noImages = mammoth.images.imgElement(() => Promise.resolve({ src: '' }));
      html = (await mammoth.convertToHtml({ buffer: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) }, { convertImage: noImages, externalFileAccess: false })).value;
    } catch (error) {
      throw new ShoalError(ErrorCode.DOCUMENT_CORRUPT, `the ${LABEL} cannot be read: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
    // mammoth ends each footnote and endnote with a back link, an arrow that is no text of the document.
    const read = htmlText(html.replace(/ ?<a href="#[^"]*-ref-[^"]*">↑<\/a>/g, ''));
    requireText(read.text, LABEL);
    const title = (await coreTitle(archive, LABEL)) ?? read.headings[0]?.text;
    return whole('docx', [{ page: 1, text: read.text, headings: read.headings }], title);
  },
});
