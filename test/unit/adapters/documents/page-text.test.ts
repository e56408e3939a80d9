import { describe, expect, it } from 'vitest';
import { pageText } from '../../../../adapters/documents/page-text.js';
import type { TextRun } from '../../../../adapters/documents/text-lines.js';

/** Runs for lines of text set at `size`, one run per line, starting at (x, y) with `pitch` between baselines. */
function column(lines: string[], x: number, y: number, size = 10, pitch = 12): TextRun[] {
  return lines.map((text, index) => ({ text, x, y: y + index * pitch, width: text.length * size * 0.5, size }));
}

const LEFT = [
  'The harbour of Velmora lies at the mouth of',
  'the river Ost, where the tide runs strongly',
  'twice a day. Pilots meet every ship at the',
  'outer buoy and guide it through the channel.',
  'Left column ends here with a full stop.',
];
const RIGHT = [
  'Right column starts with this sentence and',
  'continues describing the fish market, which',
  'opens before dawn and closes by nine in the',
  'morning, when the last boats have unloaded.',
  'Right column ends here as well, properly.',
];

describe('PDF page text: reading order', () => {
  it('reads a two-column page column by column, with a full-width title first, never interleaving lines', () => {
    const runs = [
      { text: 'Harbour Notes', x: 200, y: 60, width: 180, size: 18 },
      ...column(LEFT, 72, 100),
      ...column(RIGHT, 320, 100),
    ];
    const { text, headings } = pageText(runs);
    const flat = text.replace(/\s+/g, ' ');
    expect(flat).toContain(LEFT.join(' '));
    expect(flat).toContain(RIGHT.join(' '));
    expect(flat.indexOf('Harbour Notes')).toBe(0);
    expect(flat.indexOf(LEFT[4] ?? '')).toBeLessThan(flat.indexOf(RIGHT[0] ?? ''));
    expect(headings).toEqual([{ offset: 0, text: 'Harbour Notes' }]);
  });

  it('the same runs in a scrambled order give the same text (order comes from geometry, not from the file)', () => {
    const runs = [...column(LEFT, 72, 100), ...column(RIGHT, 320, 100)];
    const scrambled = [...runs].reverse().sort((a, b) => (a.text.length % 3) - (b.text.length % 3));
    expect(pageText(scrambled).text).toBe(pageText(runs).text);
  });

  it('cuts the page into bands at a spanning line: top band columns, the spanning line, then the bottom band columns', () => {
    const runs = [
      ...column(LEFT.slice(0, 3), 72, 100),
      ...column(RIGHT.slice(0, 3), 320, 100),
      { text: 'A figure caption that runs across both of the columns of this page', x: 72, y: 150, width: 470, size: 10 },
      ...column(LEFT.slice(3), 72, 170),
      ...column(RIGHT.slice(3), 320, 170),
    ];
    // Too few lines per band side to be columns on their own: the band test needs the whole page.
    const flat = pageText(runs).text.replace(/\s+/g, ' ');
    const order = [LEFT[0], RIGHT[0], 'A figure caption', LEFT[3], RIGHT[3]].map((part) => flat.indexOf(part ?? ''));
    expect(order.every((at) => at >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
  });

  it('reads three columns left to right', () => {
    const third = (tag: string): string[] => Array.from({ length: 6 }, (_, index) => `${tag} line ${index} of the column text here`);
    const runs = [...column(third('alpha'), 50, 100, 8, 10), ...column(third('beta'), 230, 100, 8, 10), ...column(third('gamma'), 410, 100, 8, 10)];
    const lines = pageText(runs).text.split('\n').filter((line) => line.length > 0);
    expect(lines.map((line) => line.split(' ')[0])).toEqual([...Array(6).fill('alpha'), ...Array(6).fill('beta'), ...Array(6).fill('gamma')]);
  });

  it('leaves a table of short cells row by row (its empty vertical bands are not column gutters)', () => {
    const runs: TextRun[] = [];
    const rows = [
      ['Port', 'Arrivals', 'Tonnage', 'Berths'],
      ['Velmora', '112', '40,200', '9'],
      ['Ostmund', '87', '31,050', '6'],
      ['Kessel', '45', '12,900', '4'],
      ['Brann', '23', '5,400', '2'],
    ];
    rows.forEach((cells, row) => cells.forEach((cell, col) => runs.push({ text: cell, x: 72 + col * 120, y: 100 + row * 14, width: cell.length * 5, size: 10 })));
    expect(pageText(runs).text.split('\n')).toEqual(rows.map((cells) => cells.join(' ')));
  });
});

describe('PDF page text: lines, paragraphs, headings', () => {
  it('joins runs of a line with spaces only where there is a gap, and drops doubly drawn runs', () => {
    const runs: TextRun[] = [
      { text: 'Velm', x: 72, y: 100, width: 20, size: 10 },
      { text: 'ora', x: 92, y: 100, width: 15, size: 10 },
      { text: 'harbour', x: 110, y: 100, width: 35, size: 10 },
      { text: 'harbour', x: 110.3, y: 100.2, width: 35, size: 10 },
      { text: '2', x: 146, y: 97, width: 3, size: 6 },
    ];
    expect(pageText(runs).text).toBe('Velmora harbour 2');
  });

  it('separates paragraphs by vertical space or first-line indent, and rejoins words hyphenated at a line end', () => {
    const runs = [
      ...column(['First paragraph of text that is long enough to', 'fill the measure; it ends short.'], 72, 100),
      { text: 'Second paragraph, indented, runs to the right edge with a hyph-', x: 84, y: 124, width: 230, size: 10 },
      { text: 'enated word and ends.', x: 72, y: 136, width: 100, size: 10 },
      ...column(['Third paragraph after a gap.'], 72, 170),
    ];
    expect(pageText(runs).text).toBe(
      'First paragraph of text that is long enough to\nfill the measure; it ends short.\n\nSecond paragraph, indented, runs to the right edge with a hyphenated word and ends.\n\nThird paragraph after a gap.',
    );
  });

  it('marks lines set notably larger than the body text as headings, merging a heading set on two lines', () => {
    const runs = [
      { text: 'Chapter 2', x: 72, y: 80, width: 90, size: 16 },
      { text: 'Tides and Currents', x: 72, y: 100, width: 160, size: 16 },
      ...column(['Body text set in ten point type, as most of the page.', 'More body text follows on this line.'], 72, 130),
      { text: 'A subsection', x: 72, y: 170, width: 80, size: 12 },
      ...column(['Closing body line.'], 72, 190),
    ];
    const { text, headings } = pageText(runs);
    expect(headings.map((heading) => heading.text)).toEqual(['Chapter 2 Tides and Currents', 'A subsection']);
    expect(text.slice(headings[1]?.offset ?? -1)).toMatch(/^A subsection\n\nClosing body line\.$/);
    expect(headings[0]?.offset).toBe(0);
  });

  it('a paragraph of body text set larger than the rest of the page heads nothing (its merged lines are far longer than a heading)', () => {
    const large = Array.from({ length: 12 }, (_, i) => `Summary line ${i + 1} of a paragraph set in twelve point type for emphasis.`);
    const runs = [
      { text: 'Agency Notice', x: 72, y: 60, width: 150, size: 16 },
      ...column(large, 72, 90, 12, 14),
      ...column(Array.from({ length: 30 }, (_, i) => `Body line ${i + 1} in nine point type, as most of this page is set.`), 72, 280, 9, 11),
    ];
    const { text, headings } = pageText(runs);
    expect(headings.map((heading) => heading.text)).toEqual(['Agency Notice']);
    // The text itself is all there.
    expect(text.replace(/\s+/g, ' ')).toContain(large.join(' '));
  });
});
