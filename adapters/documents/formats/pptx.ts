import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { Heading } from '../text-reader.js';
import { defineFormat, tooLarge, whole, type OpenedBody } from './format.js';
import { coreTitle, paragraphText, relationshipId, relationships, zipContainer } from './ooxml.js';
import { child, descendants, isElement, parseXml, type XmlElement } from './xml.js';
import { ZipArchive } from './zip-archive.js';

/**
 * PPTX (PowerPoint): a ZIP holding ppt/presentation.xml. One page per slide, in the order of the
 * presentation's slide list (p:sldIdLst through ppt/_rels/presentation.xml.rels), hidden slides
 * included. A slide's title placeholder (title or ctrTitle) opens the page as its heading; then
 * the text of every other shape, group and table in the slide's tree order, a paragraph (a table
 * row, its cells joined by a tab) per line and a blank line between shapes; slide number, date and footer placeholders are left
 * out. The speaker notes (the notes page's body placeholder) follow the slide's text after a
 * blank line. Pictures, charts and SmartArt drawings are not read.
 */

const LABEL = 'PPTX presentation';
const PRESENTATION = 'ppt/presentation.xml';
/** Placeholders that repeat on every slide and say nothing about it. */
const FURNITURE = new Set(['sldNum', 'dt', 'ftr', 'hdr', 'sldImg']);
const TITLES = new Set(['title', 'ctrTitle']);

type WholePages = Extract<OpenedBody, { kind: 'whole' }>['pages'];

function placeholderType(shape: XmlElement): string | undefined {
  const properties = child(shape, 'nvSpPr') ?? child(shape, 'nvGraphicFramePr');
  const placeholder = properties === undefined ? undefined : descendants(properties, 'ph')[0];
  if (placeholder === undefined) return undefined;
  // A placeholder without a type is a body placeholder (ECMA-376 19.3.1.36).
  return placeholder.attributes.type ?? 'body';
}

/** A text body's paragraphs, one per line, empty ones left out. */
function paragraphsText(body: XmlElement): string {
  return descendants(body, 'p')
    .map(paragraphText)
    .filter((line) => line.trim().length > 0)
    .join('\n');
}

/** A table (a graphic frame's `a:tbl`): a row per line, its cells joined by a tab as in XLSX; any other graphic frame (a chart, SmartArt) has no text here. */
function tableText(frame: XmlElement): string {
  return descendants(frame, 'tr')
    .map((row) => descendants(row, 'tc').map((cell) => paragraphsText(cell).replace(/\s*\n\s*/g, ' ')))
    .filter((cells) => cells.some((cell) => cell.length > 0))
    .map((cells) => cells.join('\t'))
    .join('\n');
}

/** The text blocks of a shape tree in order: each shape's paragraphs joined by '\n'; `title` collects title placeholders. */
function shapeTexts(tree: XmlElement, keep: (type: string | undefined) => boolean, title: string[]): string[] {
  const blocks: string[] = [];
  for (const node of tree.children) {
    if (!isElement(node)) continue;
    if (node.name === 'grpSp') {
      blocks.push(...shapeTexts(node, keep, title));
      continue;
    }
    if (node.name !== 'sp' && node.name !== 'graphicFrame') continue;
    const type = placeholderType(node);
    if (!keep(type)) continue;
    const body = node.name === 'sp' ? child(node, 'txBody') : node;
    if (body === undefined) continue;
    const text = node.name === 'graphicFrame' ? tableText(node) : paragraphsText(body);
    if (text.length === 0) continue;
    if (type !== undefined && TITLES.has(type) && title.length === 0) title.push(text.replace(/\s+/g, ' ').trim());
    else blocks.push(text);
  }
  return blocks;
}

async function slideParts(archive: ZipArchive, maxPages: number): Promise<string[]> {
  const presentation = await parseXml(await archive.text(PRESENTATION), LABEL, PRESENTATION);
  const rels = await relationships(archive, PRESENTATION, LABEL);
  const list = child(presentation, 'sldIdLst');
  const ids = list === undefined ? [] : descendants(list, 'sldId');
  if (ids.length > maxPages) throw tooLarge('maxPages', ids.length, maxPages, 'slides');
  return ids.map((slide) => {
    const id = relationshipId(slide.attributes);
    const part = id === undefined ? undefined : rels.get(id)?.part;
    if (part === undefined) throw new ShoalError(ErrorCode.DOCUMENT_CORRUPT, `the ${LABEL} is damaged: slide ${id ?? '(no id)'} has no part`);
    return part;
  });
}

async function notesText(archive: ZipArchive, slidePart: string): Promise<string> {
  const notes = [...(await relationships(archive, slidePart, LABEL)).values()].find((rel) => rel.type.endsWith('/notesSlide'));
  if (notes === undefined || !archive.has(notes.part)) return '';
  const root = await parseXml(await archive.text(notes.part), LABEL, notes.part);
  const tree = descendants(root, 'spTree')[0];
  return tree === undefined ? '' : shapeTexts(tree, (type) => type === 'body', []).join('\n\n');
}

async function slidePage(archive: ZipArchive, part: string, page: number): Promise<WholePages[number]> {
  const root = await parseXml(await archive.text(part), LABEL, part);
  const tree = descendants(root, 'spTree')[0];
  const title: string[] = [];
  const blocks = tree === undefined ? [] : shapeTexts(tree, (type) => type === undefined || !FURNITURE.has(type), title);
  const notes = await notesText(archive, part);
  if (notes.length > 0) blocks.push(notes);
  const headings: Heading[] = title[0] === undefined ? [] : [{ offset: 0, text: title[0] }];
  const text = [...title, ...blocks].join('\n\n');
  return { page, text, headings };
}

export const pptxFormat = defineFormat({
  type: 'pptx',
  sniff: { by: 'signature', match: zipContainer('pptx', PRESENTATION, 'pptx') },
  async open(bytes, { maxPages }) {
    const archive = await ZipArchive.open(bytes, LABEL);
    const parts = await slideParts(archive, maxPages);
    if (parts.length === 0) throw new ShoalError(ErrorCode.DOCUMENT_EMPTY, `the ${LABEL} has no slides`);
    const pages: WholePages = [];
    for (const [index, part] of parts.entries()) pages.push(await slidePage(archive, part, index + 1));
    const title = (await coreTitle(archive, LABEL)) ?? pages.find((page) => page.headings.length > 0)?.headings[0]?.text;
    return whole('pptx', pages, title);
  },
});
