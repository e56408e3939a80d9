import { ErrorCode, isShoalError, ShoalError } from '../../protocol/errors.js';
import { htmlText } from '../html-reader.js';
import { requireText } from '../text-reader.js';
import { defineFormat, whole } from './format.js';
import { coreTitle, zipContainer } from './ooxml.js';
import { parseXml } from './xml.js';
import { ZipArchive } from './zip-archive.js';

/**
 * DOCX (Word): a ZIP holding word/document.xml. mammoth turns it into HTML (headings from the
 * Heading 1-6 styles become <h1>..<h6>), read as any HTML page, so headings become chunk headings.
 * One page (a Word file has no fixed pages); footnotes and endnotes at its end, as mammoth puts
 * them. Images are skipped, not read; comments, headers and footers are not part of mammoth's body. Title: docProps/core.xml's dc:title, else the first heading.
 */

const LABEL = 'DOCX document';

/** The parts mammoth reads: the package's relationships and content types, and word/'s XML. */
function readByMammoth(name: string): boolean {
  return name === '[Content_Types].xml' || name === '_rels/.rels' || (name.startsWith('word/') && /\.(xml|rels)$/i.test(name));
}

/**
 * Why mammoth failed when a part it reads is not well-formed XML: that part named, with the line
 * (docs/ingest.md promises the part). mammoth's own xmldom message names no part and no line
 * (`[xmldom error] ... @#[line:undefined,col:undefined]`), and xmldom lets some breakage through
 * (a mismatched end tag) for mammoth to fail on later ("Could not find the body element").
 * Looked for only after a failure, so a readable file is not parsed twice; null when every part is
 * well-formed (or cannot be inflated again within the archive's budget).
 */
async function malformedPart(archive: ZipArchive): Promise<ShoalError | null> {
  const parts = archive.names().filter(readByMammoth);
  const ordered = [...parts.filter((name) => name === 'word/document.xml'), ...parts.filter((name) => name !== 'word/document.xml')];
  for (const part of ordered) {
    let text: string;
    try {
      text = await archive.text(part);
    } catch {
      return null;
    }
    try {
      await parseXml(text, LABEL, part);
    } catch (error) {
      if (isShoalError(error) && error.code === ErrorCode.DOCUMENT_CORRUPT) return error;
      throw error;
    }
  }
  return null;
}

/** mammoth's message without xmldom's decoration (`error: [xmldom error]\t`, `@#[line:undefined,col:undefined]`). */
function mammothMessage(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  if (!message.includes('[xmldom ')) return message;
  const detail = message.replace(/^error:\s*/i, '').replace(/\[xmldom [^\]]*\]\s*/g, '').replace(/@#\[line:[^\]]*\]/g, '').replace(/\s+/g, ' ').trim();
  return `an XML part is malformed (${detail})`;
}

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
      throw (await malformedPart(archive)) ?? new ShoalError(ErrorCode.DOCUMENT_CORRUPT, `the ${LABEL} cannot be read: ${mammothMessage(error)}`, { cause: error });
    }
    // mammoth ends each footnote and endnote with a back link, an arrow that is no text of the document.
    const read = htmlText(html.replace(/ ?<a href="#[^"]*-ref-[^"]*">↑<\/a>/g, ''));
    requireText(read.text, LABEL);
    const title = (await coreTitle(archive, LABEL)) ?? read.headings[0]?.text;
    return whole('docx', [{ page: 1, text: read.text, headings: read.headings }], title);
  },
});
