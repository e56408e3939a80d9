/**
 * Decompression-bomb PDFs, written by hand in milliseconds: a zlib stream that inflates to
 * `size` bytes of one value is built directly as fixed-Huffman deflate codes (one literal, then
 * "copy 258 bytes from 1 back" repeated, 13 bits each), so 1 GiB costs 6.5 MB and no compression
 * work. Used by test/reliability/pdf-bombs.test.ts.
 */

class BitWriter {
  readonly bytes: Uint8Array;
  #at = 0;
  #bit = 0;

  constructor(capacity: number) {
    this.bytes = new Uint8Array(capacity);
  }

  /** `count` bits of `value`, least significant first (deflate's order for headers and extra bits). */
  bits(value: number, count: number): void {
    for (let i = 0; i < count; i += 1) {
      if ((value >> i) & 1) this.bytes[this.#at] = (this.bytes[this.#at] ?? 0) | (1 << this.#bit);
      this.#bit += 1;
      if (this.#bit === 8) {
        this.#bit = 0;
        this.#at += 1;
      }
    }
  }

  /** A Huffman code of `count` bits, most significant first. */
  code(value: number, count: number): void {
    for (let i = count - 1; i >= 0; i -= 1) this.bits((value >> i) & 1, 1);
  }

  /** Bytes written, the last one padded. */
  get length(): number {
    return this.#at + (this.#bit > 0 ? 1 : 0);
  }
}

/** A zlib stream (RFC 1950) that inflates to `size` bytes of `byte` (size ≥ 1). */
export function zlibBomb(size: number, byte = 0x20): Uint8Array {
  const copies = Math.floor((size - 1) / 258);
  const tail = size - 1 - copies * 258;
  const writer = new BitWriter(Math.ceil(((copies + 2) * 13 + (tail + 1) * 9 + 32) / 8) + 16);
  writer.bits(1, 1); // BFINAL
  writer.bits(1, 2); // fixed Huffman codes
  const literal = (value: number): void => (value <= 143 ? writer.code(0x30 + value, 8) : writer.code(0x190 + value - 144, 9));
  literal(byte);
  for (let i = 0; i < copies; i += 1) {
    writer.code(0xc5, 8); // length 258 (code 285)
    writer.code(0, 5); // distance 1
  }
  for (let i = 0; i < tail; i += 1) literal(byte);
  writer.code(0, 7); // end of block
  // Adler-32 of `size` bytes of `byte`, computed, not run.
  const mod = 65521n;
  const n = BigInt(size);
  const b = BigInt(byte);
  const a32 = (1n + b * n) % mod;
  const b32 = (n + (b * n * (n + 1n)) / 2n) % mod;
  const body = writer.bytes.subarray(0, writer.length);
  const out = new Uint8Array(2 + body.length + 4);
  out.set([0x78, 0x01]);
  out.set(body, 2);
  const adler = Number((b32 << 16n) | a32);
  new DataView(out.buffer).setUint32(2 + body.length, adler >>> 0);
  return out;
}

/** A one-page PDF; `image` (an XObject painted over the page) and `content` are stream objects given as dictionary entries and data. */
export function bombPdf(parts: { content: { filter: string; data: Uint8Array }; image?: { dictionary: string; data: Uint8Array }; font?: boolean }): Uint8Array {
  const chunks: (string | Uint8Array)[] = ['%PDF-1.4\n'];
  const offsets: number[] = [];
  let length = chunks[0]?.length ?? 0;
  const push = (part: string | Uint8Array): void => {
    chunks.push(part);
    length += typeof part === 'string' ? Buffer.byteLength(part, 'latin1') : part.length;
  };
  const object = (number: number, ...body: (string | Uint8Array)[]): void => {
    offsets[number] = length;
    push(`${number} 0 obj\n`);
    for (const part of body) push(part);
    push('\nendobj\n');
  };
  const font = parts.font === true ? '/Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >>' : '';
  const resources = `<< ${font}${parts.image === undefined ? '' : ' /XObject << /Im1 5 0 R >>'} >>`;
  object(1, '<< /Type /Catalog /Pages 2 0 R >>');
  object(2, '<< /Type /Pages /Kids [3 0 R] /Count 1 >>');
  object(3, `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources ${resources} /Contents 4 0 R >>`);
  object(4, `<< /Length ${parts.content.data.length}${parts.content.filter} >>\nstream\n`, parts.content.data, '\nendstream');
  if (parts.image !== undefined) object(5, `<< /Type /XObject /Subtype /Image ${parts.image.dictionary} /Length ${parts.image.data.length} >>\nstream\n`, parts.image.data, '\nendstream');
  const count = parts.image === undefined ? 5 : 6;
  const xref = length;
  push(`xref\n0 ${count}\n0000000000 65535 f \n`);
  for (let n = 1; n < count; n += 1) push(`${String(offsets[n] ?? 0).padStart(10, '0')} 00000 n \n`);
  push(`trailer\n<< /Size ${count} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`);
  return new Uint8Array(Buffer.concat(chunks.map((part) => (typeof part === 'string' ? Buffer.from(part, 'latin1') : part))));
}

/** A page whose content stream inflates to `size` bytes (spaces: pdfjs reads them all). */
export function contentBomb(size: number): Uint8Array {
  return bombPdf({ content: { filter: ' /Filter /FlateDecode', data: zlibBomb(size) } });
}

/** A page painting a `side`×`side` grey image whose Flate stream inflates to all its pixels. */
export function imageBomb(side: number): Uint8Array {
  const paint = new TextEncoder().encode('q 612 0 0 792 0 0 cm /Im1 Do Q');
  return bombPdf({
    content: { filter: '', data: paint },
    image: { dictionary: `/Width ${side} /Height ${side} /ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /FlateDecode`, data: zlibBomb(side * side, 0xff) },
  });
}

/** A page of `items` one-letter text items, each on its own line (under every stream limit: 19 bytes an item). */
export function textItemsPdf(items: number): Uint8Array {
  // Tiny type on lines 0.003 pt apart: 250,000 of them fit on the page, each its own item.
  const content = `BT /F1 0.002 Tf 10 780 Td ${'(a) Tj 0 -0.003 Td '.repeat(items)}ET`;
  return bombPdf({ content: { filter: '', data: new TextEncoder().encode(content) }, font: true });
}
