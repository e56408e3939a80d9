import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { htmlText } from '../html-reader.js';
import { decodeHtml } from '../text-reader.js';
import { defineFormat, tooLarge, whole, type OpenedBody, type SignatureProbe, type Sniffed } from './format.js';
import { resolvePart } from './ooxml.js';
import { child, children, descendants, parseXml, textOf } from './xml.js';
import { ZipArchive } from './zip-archive.js';
import { usableTitle } from './title.js';

/**
 * EPUB (2 and 3): a ZIP whose first member is an uncompressed `mimetype` holding
 * `application/epub+zip` (or, in a sloppier book, which has `mimetype` and
 * META-INF/container.xml). META-INF/container.xml names the package (OPF); its spine gives the
 * reading order. One page per spine item, each XHTML document read as an HTML page (h1..h6 become
 * headings); an item that is not (X)HTML (an SVG cover) or has no text is an empty page. The
 * title is the package's dc:title. Images, stylesheets, fonts and the navigation document (unless
 * the spine lists it) are not read.
 */

const LABEL = 'EPUB book';
const CONTAINER = 'META-INF/container.xml';
const HTML_TYPES = new Set(['application/xhtml+xml', 'text/html']);

type WholePages = Extract<OpenedBody, { kind: 'whole' }>['pages'];

function sniffEpub({ zip, extension }: SignatureProbe): Sniffed | null {
  if (zip === null) return null;
  if (zip.epubSignature || (zip.names.has('mimetype') && zip.names.has(CONTAINER))) return { type: 'epub' };
  return !zip.complete && extension === 'epub' ? { type: 'epub' } : null;
}

function corrupt(reason: string): ShoalError {
  return new ShoalError(ErrorCode.DOCUMENT_CORRUPT, `the ${LABEL} is damaged: ${reason}`);
}

async function packagePath(archive: ZipArchive): Promise<string> {
  if (!archive.has(CONTAINER)) throw corrupt(`it has no ${CONTAINER}`);
  const container = await parseXml(await archive.text(CONTAINER), LABEL, CONTAINER);
  const rootfiles = descendants(container, 'rootfile');
  const rootfile = rootfiles.find((file) => file.attributes['media-type'] === 'application/oebps-package+xml') ?? rootfiles[0];
  const path = rootfile?.attributes['full-path'];
  if (path === undefined || path.length === 0) throw corrupt(`${CONTAINER} names no package document`);
  return resolvePart('', path);
}

export const epubFormat = defineFormat({
  type: 'epub',
  sniff: { by: 'signature', match: sniffEpub },
  async open(bytes, { maxPages }) {
    const archive = await ZipArchive.open(bytes, LABEL);
    const opf = await packagePath(archive);
    const pkg = await parseXml(await archive.text(opf), LABEL, opf);
    const manifest = new Map<string, { part: string; type: string }>();
    for (const item of descendants(child(pkg, 'manifest') ?? pkg, 'item')) {
      const { id, href } = item.attributes;
      if (id !== undefined && href !== undefined) manifest.set(id, { part: resolvePart(opf, href), type: item.attributes['media-type'] ?? '' });
    }
    const spine = children(child(pkg, 'spine') ?? pkg, 'itemref');
    if (spine.length === 0) throw corrupt('its package has no spine (no reading order)');
    if (spine.length > maxPages) throw tooLarge('maxPages', spine.length, maxPages, 'spine items');
    const pages: WholePages = [];
    for (const [index, itemref] of spine.entries()) {
      const item = manifest.get(itemref.attributes.idref ?? '');
      if (item === undefined) throw corrupt(`spine item ${itemref.attributes.idref ?? '(no idref)'} is not in the manifest`);
      if (!HTML_TYPES.has(item.type)) {
        pages.push({ page: index + 1, text: '', headings: [] });
        continue;
      }
      const read = htmlText(decodeHtml(await archive.bytes(item.part)));
      pages.push({ page: index + 1, text: read.text, headings: read.headings });
    }
    const metadata = child(pkg, 'metadata');
    const titleElement = metadata === undefined ? undefined : descendants(metadata, 'title')[0];
    const title = titleElement === undefined ? undefined : usableTitle(textOf(titleElement).trim());
    return whole('epub', pages, title ?? pages.find((page) => page.headings.length > 0)?.headings[0]?.text);
  },
});
