/**
 * The member names of a ZIP archive, read without inflating anything, for sniffing: DOCX, PPTX,
 * XLSX and EPUB are all ZIP archives told apart by what they hold. Read from the central
 * directory at the end of the file; when that cannot be found (the gateway sniffs the first 8 KiB
 * of an upload; a truncated download), from the local headers within the bytes, marked incomplete.
 */

export interface ZipMembers {
  names: ReadonlySet<string>;
  /** True when the names come from the central directory: all of them. */
  complete: boolean;
  /** Members the central directory declares (set when `complete`). */
  declared: number;
  /** The first member is an uncompressed `mimetype` holding `application/epub+zip` (EPUB's signature). */
  epubSignature: boolean;
}

const LOCAL_HEADER = 0x04034b50;
const CENTRAL_HEADER = 0x02014b50;
const END_OF_DIRECTORY = 0x06054b50;
const ZIP64_LOCATOR = 0x07064b50;
const ZIP64_END = 0x06064b50;
/** Names listed at most, for sniffing (the reader enforces its own member limit). */
const MAX_LISTED = 100_000;

const utf8 = new TextDecoder('utf-8');

export function isZip(bytes: Uint8Array): boolean {
  return bytes.length >= 4 && view(bytes).getUint32(0, true) === LOCAL_HEADER;
}

function view(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Offset and entry count of the central directory, or null when the archive's end is not in `bytes`. */
function centralDirectory(bytes: Uint8Array): { offset: number; count: number } | null {
  const data = view(bytes);
  const lowest = Math.max(0, bytes.length - 22 - 0xffff);
  for (let at = bytes.length - 22; at >= lowest; at--) {
    if (data.getUint32(at, true) !== END_OF_DIRECTORY) continue;
    let count = data.getUint16(at + 10, true);
    let offset = data.getUint32(at + 16, true);
    if ((count === 0xffff || offset === 0xffffffff) && at >= 20 && data.getUint32(at - 20, true) === ZIP64_LOCATOR) {
      const end = Number(data.getBigUint64(at - 20 + 8, true));
      if (end + 56 > bytes.length || data.getUint32(end, true) !== ZIP64_END) return null;
      count = Number(data.getBigUint64(end + 32, true));
      offset = Number(data.getBigUint64(end + 48, true));
    }
    return offset < bytes.length ? { offset, count } : null;
  }
  return null;
}

function centralNames(bytes: Uint8Array, directory: { offset: number; count: number }): Set<string> | null {
  const data = view(bytes);
  const names = new Set<string>();
  let at = directory.offset;
  for (let i = 0; i < Math.min(directory.count, MAX_LISTED); i++) {
    if (at + 46 > bytes.length || data.getUint32(at, true) !== CENTRAL_HEADER) return null;
    const nameLength = data.getUint16(at + 28, true);
    const rest = nameLength + data.getUint16(at + 30, true) + data.getUint16(at + 32, true);
    if (at + 46 + nameLength > bytes.length) return null;
    names.add(utf8.decode(bytes.subarray(at + 46, at + 46 + nameLength)));
    at += 46 + rest;
  }
  return names;
}

/** Names of the local headers found in `bytes` (each local header starts with its signature). */
function localNames(bytes: Uint8Array): Set<string> {
  const data = view(bytes);
  const names = new Set<string>();
  for (let at = 0; at + 30 <= bytes.length && names.size < MAX_LISTED; at++) {
    if (bytes[at] !== 0x50 || data.getUint32(at, true) !== LOCAL_HEADER) continue;
    const nameLength = data.getUint16(at + 26, true);
    if (at + 30 + nameLength > bytes.length) break;
    names.add(utf8.decode(bytes.subarray(at + 30, at + 30 + nameLength)));
  }
  return names;
}

const EPUB_SIGNATURE = [...'mimetypeapplication/epub+zip'].map((char) => char.charCodeAt(0));

function hasEpubSignature(bytes: Uint8Array): boolean {
  // The first local header: stored (method 0), name `mimetype`, no extra field, then the content.
  if (bytes.length < 30 + EPUB_SIGNATURE.length || view(bytes).getUint16(8, true) !== 0) return false;
  return EPUB_SIGNATURE.every((value, index) => bytes[30 + index] === value);
}

/** The members of the ZIP archive `bytes`, or null when it is not one. */
export function zipMembers(bytes: Uint8Array): ZipMembers | null {
  if (!isZip(bytes)) return null;
  const epubSignature = hasEpubSignature(bytes);
  const directory = centralDirectory(bytes);
  const names = directory === null ? null : centralNames(bytes, directory);
  if (directory !== null && names !== null) return { names, complete: true, declared: directory.count, epubSignature };
  return { names: localNames(bytes), complete: false, declared: 0, epubSignature };
}
