import { deflateSync } from 'node:zlib';

/**
 * A minimal PDF writer for the documents Shoal makes itself (the README's sample folder, test
 * fixtures): pages of text in the standard Helvetica fonts, or pages that are one greyscale image
 * (a scanned page). Enough of PDF 1.4 for any reader; nothing more.
 */

export interface TextLineSpec {
  text: string;
  /** Left edge in points from the page's left side. */
  x: number;
  /** Baseline in points from the page's top. */
  y: number;
  size: number;
  bold?: boolean;
}

export interface GreyImage {
  width: number;
  height: number;
  /** One byte per pixel, rows top to bottom. */
  pixels: Uint8Array;
}

export type PageSpec = { width: number; height: number } & ({ lines: TextLineSpec[] } | { image: GreyImage });

export interface PdfInfo {
  title?: string;
  author?: string;
}

/** A PDF string literal of printable ASCII (other characters become '?', as WinAnsi has no more to offer here). */
function literal(text: string): string {
  const ascii = text
    .replace(/[‘’]/g, "'")
    .replace(/[“”]/g, '"')
    .replace(/[–—]/g, '-')
    .replace(/[^\x20-\x7e]/g, '?');
  return `(${ascii.replace(/[\\()]/g, (char) => `\\${char}`)})`;
}

function textStream(page: { height: number; lines: TextLineSpec[] }): string {
  const ops = ['BT'];
  for (const line of page.lines) {
    ops.push(`/${line.bold === true ? 'F2' : 'F1'} ${line.size} Tf`, `1 0 0 1 ${line.x.toFixed(2)} ${(page.height - line.y).toFixed(2)} Tm`, `${literal(line.text)} Tj`);
  }
  ops.push('ET');
  return ops.join('\n');
}

/** Builds the bytes of a PDF with the given pages. */
export function writePdf(pages: readonly PageSpec[], info: PdfInfo = {}): Uint8Array {
  const objects: (string | Uint8Array)[][] = [];
  const add = (...parts: (string | Uint8Array)[]): number => objects.push(parts);
  const stream = (dictionary: string, data: Uint8Array): (string | Uint8Array)[] => [`<< ${dictionary} /Length ${data.length} >>\nstream\n`, data, '\nendstream'];

  const catalog = add('');
  const pagesObject = add('');
  const helvetica = add('<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>');
  const helveticaBold = add('<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>');
  const kids: number[] = [];
  for (const page of pages) {
    let resources: string;
    let content: Uint8Array;
    if ('lines' in page) {
      resources = `<< /Font << /F1 ${helvetica} 0 R /F2 ${helveticaBold} 0 R >> >>`;
      content = new TextEncoder().encode(textStream(page));
    } else {
      const { width, height, pixels } = page.image;
      const image = add(...stream(`/Type /XObject /Subtype /Image /Width ${width} /Height ${height} /ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /FlateDecode`, deflateSync(pixels)));
      resources = `<< /XObject << /Im1 ${image} 0 R >> >>`;
      // The image's unit square scaled to the whole page: a scan.
      content = new TextEncoder().encode(`q ${page.width} 0 0 ${page.height} 0 0 cm /Im1 Do Q`);
    }
    const contents = add(...stream('', content));
    kids.push(add(`<< /Type /Page /Parent ${pagesObject} 0 R /MediaBox [0 0 ${page.width} ${page.height}] /Resources ${resources} /Contents ${contents} 0 R >>`));
  }
  objects[catalog - 1] = [`<< /Type /Catalog /Pages ${pagesObject} 0 R >>`];
  objects[pagesObject - 1] = [`<< /Type /Pages /Kids [${kids.map((kid) => `${kid} 0 R`).join(' ')}] /Count ${kids.length} >>`];
  const infoEntries = [info.title === undefined ? '' : `/Title ${literal(info.title)}`, info.author === undefined ? '' : `/Author ${literal(info.author)}`, '/Producer (Shoal)'];
  const infoObject = add(`<< ${infoEntries.filter((entry) => entry.length > 0).join(' ')} >>`);

  const chunks: Uint8Array[] = [];
  let length = 0;
  const push = (part: string | Uint8Array): void => {
    const bytes = typeof part === 'string' ? new TextEncoder().encode(part) : part;
    chunks.push(bytes);
    length += bytes.length;
  };
  // The binary comment line marks the file as binary for transfer tools.
  push('%PDF-1.4\n%\xe2\xe3\xcf\xd3\n');
  const offsets: number[] = [];
  objects.forEach((parts, index) => {
    offsets.push(length);
    push(`${index + 1} 0 obj\n`);
    for (const part of parts) push(part);
    push('\nendobj\n');
  });
  const xref = length;
  push(`xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`);
  for (const offset of offsets) push(`${String(offset).padStart(10, '0')} 00000 n \n`);
  push(`trailer\n<< /Size ${objects.length + 1} /Root ${catalog} 0 R /Info ${infoObject} 0 R >>\nstartxref\n${xref}\n%%EOF\n`);
  const out = new Uint8Array(length);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}

/** Average Helvetica advance per character, in em (mixed-case prose). */
const HELVETICA_EM_PER_CHAR = 0.5;

/** Lines of at most `width` points of Helvetica at `size`, broken at spaces. */
export function wrapText(text: string, width: number, size: number): string[] {
  const maxChars = Math.max(10, Math.floor(width / (size * HELVETICA_EM_PER_CHAR)));
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter((part) => part.length > 0)) {
    if (line.length > 0 && line.length + 1 + word.length > maxChars) {
      lines.push(line);
      line = word;
    } else line = line.length === 0 ? word : `${line} ${word}`;
  }
  if (line.length > 0) lines.push(line);
  return lines;
}
