/**
 * Which character encoding a text, Markdown or HTML file is in, decided from its bytes: a byte
 * order mark (UTF-8, UTF-16LE/BE); UTF-16 without one, recognized by its zero bytes at every other
 * position (ASCII text in UTF-16 is half zeros); strict UTF-8; UTF-8 with a few bad bytes (a file
 * edited by two tools: decoded as UTF-8, each bad byte a U+FFFD, rather than the whole file read
 * as Windows-1252 and every accented letter mangled); an HTML page's own `<meta charset>` when
 * its bytes are not UTF-8; else Windows-1252 (a superset of Latin-1, the usual legacy default).
 */

/** Bytes looked at to recognize UTF-16 without a byte order mark. */
const UTF16_WINDOW = 4096;
/** HTML bytes searched for a `<meta charset>` (the HTML standard's prescan reads 1024). */
const META_WINDOW = 1024;

export type TextEncoding = 'utf-8' | 'utf-16le' | 'utf-16be' | 'windows-1252' | (string & {});

/** The byte order mark's encoding and length, or null. */
function byteOrderMark(bytes: Uint8Array): { encoding: 'utf-8' | 'utf-16le' | 'utf-16be'; length: number } | null {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) return { encoding: 'utf-8', length: 3 };
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return { encoding: 'utf-16le', length: 2 };
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return { encoding: 'utf-16be', length: 2 };
  return null;
}

/**
 * UTF-16 without a byte order mark: most code units of text in Latin scripts have a zero high
 * byte, so zeros fill one of the two byte positions and almost none of the other.
 */
function unmarkedUtf16(bytes: Uint8Array): 'utf-16le' | 'utf-16be' | null {
  const end = Math.min(bytes.length, UTF16_WINDOW) & ~1;
  if (end < 4) return null;
  let evenZeros = 0;
  let oddZeros = 0;
  for (let i = 0; i < end; i += 2) {
    if (bytes[i] === 0) evenZeros++;
    if (bytes[i + 1] === 0) oddZeros++;
  }
  const units = end / 2;
  if (oddZeros >= units * 0.3 && evenZeros <= units * 0.02) return 'utf-16le';
  if (evenZeros >= units * 0.3 && oddZeros <= units * 0.02) return 'utf-16be';
  return null;
}

/** Whether the bytes are UTF-8 but for a few bad bytes: more well-formed multi-byte characters than bad bytes. */
function mostlyUtf8(bytes: Uint8Array): boolean {
  let good = 0;
  let bad = 0;
  for (let i = 0; i < bytes.length; ) {
    const byte = bytes[i] ?? 0;
    if (byte < 0x80) {
      i++;
      continue;
    }
    const length = byte >= 0xc2 && byte <= 0xdf ? 2 : byte >= 0xe0 && byte <= 0xef ? 3 : byte >= 0xf0 && byte <= 0xf4 ? 4 : 0;
    let ok = length > 0 && i + length <= bytes.length;
    for (let k = 1; ok && k < length; k++) ok = ((bytes[i + k] ?? 0) & 0xc0) === 0x80;
    if (ok) {
      good++;
      i += length;
    } else {
      bad++;
      i++;
    }
  }
  return good > bad;
}

/** The charset an HTML page declares in its first bytes (`<meta charset="…">` or `http-equiv` content), if TextDecoder knows it. */
export function declaredHtmlCharset(bytes: Uint8Array): string | null {
  // The declaration is ASCII in every encoding a meta prescan applies to.
  const head = new TextDecoder('windows-1252').decode(bytes.subarray(0, META_WINDOW));
  const match = /<meta\b[^>]*?\bcharset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)/i.exec(head);
  const label = match?.[1];
  if (label === undefined) return null;
  try {
    const encoding = new TextDecoder(label).encoding;
    // A page that could say it in ASCII is not UTF-16 (the HTML standard reads such a meta as UTF-8).
    return encoding.startsWith('utf-16') ? 'utf-8' : encoding;
  } catch {
    return null; // A label this runtime does not know: the bytes decide.
  }
}

/** UTF-16 by its byte order mark, or without one by where its zero bytes fall; null for anything else. */
export function utf16Encoding(bytes: Uint8Array): 'utf-16le' | 'utf-16be' | null {
  const mark = byteOrderMark(bytes)?.encoding;
  if (mark === undefined) return unmarkedUtf16(bytes);
  return mark === 'utf-16le' || mark === 'utf-16be' ? mark : null;
}

/**
 * The text of a document's bytes, in the order above; `declared` is an HTML page's own charset,
 * used only when the bytes are not UTF-8. Valid UTF-8, the common case, is decoded once.
 */
export function decodeDocumentBytes(bytes: Uint8Array, declared: string | null = null): string {
  const bom = byteOrderMark(bytes);
  if (bom !== null) return decodeWith(bytes, bom.encoding);
  const utf16 = unmarkedUtf16(bytes);
  if (utf16 !== null) return decodeWith(bytes, utf16);
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    // Not UTF-8 throughout: below.
  }
  if (declared !== null && declared !== 'utf-8') return decodeWith(bytes, declared);
  return decodeWith(bytes, mostlyUtf8(bytes) ? 'utf-8' : 'windows-1252');
}

/** The text of `bytes` in `encoding`, without a byte order mark; bad bytes become U+FFFD. */
export function decodeWith(bytes: Uint8Array, encoding: TextEncoding): string {
  const bom = byteOrderMark(bytes);
  const body = bom !== null && bom.encoding === encoding ? bytes.subarray(bom.length) : bytes;
  return new TextDecoder(encoding, { ignoreBOM: true }).decode(body);
}
