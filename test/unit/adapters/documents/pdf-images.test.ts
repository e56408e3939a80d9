import { describe, expect, it } from 'vitest';
import { hasImageXObjects } from '../../../../adapters/documents/pdf-reader.js';
import { writePdf } from '../../../../adapters/documents/pdf-writer.js';
import { largestTextFreeBand } from '../../../../adapters/documents/text-lines.js';

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);

describe('image XObjects in a PDF file', () => {
  it('finds /Subtype /Image dictionaries, with or without a space, and nothing in text-only files', () => {
    expect(hasImageXObjects(bytes('5 0 obj << /Type /XObject /Subtype /Image /Width 10 >>'))).toBe(true);
    expect(hasImageXObjects(bytes('5 0 obj<</Subtype/Image/Width 10>>'))).toBe(true);
    // Procedure set names and other names starting with /Image are not images.
    expect(hasImageXObjects(bytes('/ProcSet [/PDF /Text /ImageB /ImageC /ImageI] /Subtype /Form /ImageMask true'))).toBe(false);
    expect(hasImageXObjects(bytes('/Subtype /ImageX'))).toBe(false);
  });

  it('agrees with what the PDF writer produced', () => {
    const text = writePdf([{ width: 200, height: 200, lines: [{ text: 'hello', x: 10, y: 20, size: 12 }] }]);
    const scan = writePdf([{ width: 200, height: 200, image: { width: 2, height: 2, pixels: new Uint8Array([0, 255, 255, 0]) } }]);
    expect(hasImageXObjects(text)).toBe(false);
    expect(hasImageXObjects(scan)).toBe(true);
  });
});

describe('text-free bands of a page', () => {
  it('measures the tallest band without text, margins included', () => {
    const run = (y: number): { text: string; x: number; y: number; width: number; size: number } => ({ text: 'x', x: 72, y, width: 5, size: 10 });
    // A header at the top and a footer at the bottom of a 1000-pt page: the middle is free.
    expect(largestTextFreeBand([run(50), run(960)], 1000)).toBeCloseTo((950 - 52.5) / 1000, 5);
    // Lines every 20 pt from top to bottom: the margins are the largest bands.
    const full = Array.from({ length: 45 }, (_, index) => run(60 + index * 20));
    expect(largestTextFreeBand(full, 1000)).toBeCloseTo((1000 - 942.5) / 1000, 5);
    expect(largestTextFreeBand([], 1000)).toBe(1);
  });
});
