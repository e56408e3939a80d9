import { posix } from 'node:path';
import { usableTitle } from './title.js';
import type { SignatureProbe, Sniffed } from './format.js';
import { child, children, descendants, parseXml, textOf, type XmlElement } from './xml.js';
import type { ZipArchive } from './zip-archive.js';

/**
 * What DOCX, PPTX and XLSX (Office Open XML) and EPUB share: told by the members of their ZIP
 * archive, parts found through relationship files, and a title in the package's metadata.
 */

/**
 * A sniffer for a ZIP container holding `member`. When only part of the archive is at hand (the
 * first bytes of an upload, a truncated file: no central directory), a local header within the
 * member's folder (`word/`...), or else the file's extension, decides; reading the whole file
 * then tells a damaged one.
 */
export function zipContainer(type: Sniffed['type'], member: string, extension: string): (probe: SignatureProbe) => Sniffed | null {
  const folder = member.slice(0, member.indexOf('/') + 1);
  return ({ zip, extension: actual }) => {
    if (zip === null) return null;
    if (zip.names.has(member)) return { type };
    if (zip.complete) return null;
    return [...zip.names].some((name) => name.startsWith(folder)) || actual === extension ? { type } : null;
  };
}

/** A part's path inside the archive from a relationship target (relative to the source part's folder, or absolute). */
export function resolvePart(fromPart: string, target: string): string {
  const decoded = safeDecode(target.split('#')[0] ?? '');
  const joined = decoded.startsWith('/') ? decoded.slice(1) : posix.join(posix.dirname(fromPart), decoded);
  // Normalized inside the archive: `..` past its root stays at the root.
  return posix.normalize(`/${joined}`).slice(1);
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

export interface Relationship {
  type: string;
  /** Path of the target part inside the archive. */
  part: string;
}

/** The internal relationships of `part` (from `<folder>/_rels/<name>.rels`) by id; none when it has no such file. */
export async function relationships(archive: ZipArchive, part: string, label: string): Promise<Map<string, Relationship>> {
  const relsPath = posix.join(posix.dirname(part), '_rels', `${posix.basename(part)}.rels`);
  const text = await archive.optionalText(relsPath);
  const out = new Map<string, Relationship>();
  if (text === undefined) return out;
  const root = await parseXml(text, label, relsPath);
  for (const rel of children(root, 'Relationship')) {
    const { Id: id, Target: target, Type: type = '', TargetMode: mode } = rel.attributes;
    if (id === undefined || target === undefined || mode === 'External') continue;
    out.set(id, { type, part: resolvePart(part, target) });
  }
  return out;
}

/** The relationship id attribute (`r:id`, whatever the prefix) of an element. */
export function relationshipId(attributes: Readonly<Record<string, string>>): string | undefined {
  const key = Object.keys(attributes).find((name) => name.includes(':') && name.endsWith(':id'));
  return key === undefined ? undefined : attributes[key];
}

/** Titles office software and generators write by default: they name the application, not the document. */
const DEFAULT_TITLE = /^(PowerPoint Presentation|Presentation\s*\d*|Document\s*\d*|Book\s*\d*|Untitled.*|PptxGenJS Presentation|Slide \d+)$/i;

/** `dc:title` of docProps/core.xml, when the document has a usable one (not a default like "PowerPoint Presentation"). */
export async function coreTitle(archive: ZipArchive, label: string): Promise<string | undefined> {
  const text = await archive.optionalText('docProps/core.xml');
  if (text === undefined) return undefined;
  const root = await parseXml(text, label, 'docProps/core.xml');
  const element = child(root, 'title');
  const title = element === undefined ? undefined : usableTitle(textOf(element));
  return title === undefined || DEFAULT_TITLE.test(title) ? undefined : title;
}

/** The text of a DrawingML paragraph (`a:p`): its runs and fields, a line break as '\n'. */
export function paragraphText(paragraph: XmlElement): string {
  return paragraph.children
    .map((node) => {
      if (!('name' in node)) return '';
      if (node.name === 'br') return '\n';
      if (node.name === 'r' || node.name === 'fld') return descendants(node, 't').map(textOf).join('');
      return '';
    })
    .join('');
}
