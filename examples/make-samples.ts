import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { openPdf, renderPdfPage } from '../adapters/documents/pdf-reader.js';
import { wrapText, writePdf, type PageSpec, type TextLineSpec } from '../adapters/documents/pdf-writer.js';

/**
 * Writes the README quick start's sample folder, examples/docs/: two text PDFs, one scanned page
 * (an image-only PDF, so ingesting it exercises OCR) and one Markdown file, about the invented
 * port town of Velmora. Everything is generated here; nothing is copied from elsewhere.
 *
 *   npx tsx examples/make-samples.ts
 */

const OUT = fileURLToPath(new URL('./docs/', import.meta.url));
const PAGE = { width: 612, height: 792 };
const MARGIN = 72;
const MEASURE = PAGE.width - 2 * MARGIN;

interface Section {
  heading?: string;
  paragraphs: string[];
}

/** Lays sections out on letter pages: a title, bold headings, 11-pt paragraphs, new pages as needed. */
function layout(title: string, sections: readonly Section[]): PageSpec[] {
  const pages: PageSpec[] = [];
  let lines: TextLineSpec[] = [];
  let y = MARGIN + 10;
  const room = (height: number): void => {
    if (y + height <= PAGE.height - MARGIN) return;
    pages.push({ ...PAGE, lines });
    lines = [];
    y = MARGIN + 10;
  };
  lines.push({ text: title, x: MARGIN, y, size: 20, bold: true });
  y += 36;
  for (const section of sections) {
    if (section.heading !== undefined) {
      room(40);
      y += 6;
      lines.push({ text: section.heading, x: MARGIN, y, size: 14, bold: true });
      y += 22;
    }
    for (const paragraph of section.paragraphs) {
      for (const line of wrapText(paragraph, MEASURE, 11)) {
        room(15);
        lines.push({ text: line, x: MARGIN, y, size: 11 });
        y += 15;
      }
      y += 8;
    }
  }
  pages.push({ ...PAGE, lines });
  return pages;
}

const PILOTAGE: Section[] = [
  {
    paragraphs: [
      'The port of Velmora sits where the river Ost meets the Gannet Sound. Its approach is short but awkward: a dredged channel of two nautical miles between the Kessel sandbank and the breakwater, with a tidal range of up to four metres at spring tides. Every vessel over sixty metres, and every vessel carrying dangerous goods, must take a licensed harbour pilot.',
    ],
  },
  {
    heading: 'Boarding and the outer buoy',
    paragraphs: [
      'Pilots board at the Velmora Outer Buoy, a red and white safe-water mark two miles west of the breakwater. The pilot cutter Ostwind leaves the inner harbour forty minutes before each booked arrival. In winds above Beaufort force seven, boarding moves to the lee of Kessel Point, and ships are asked to make a lee on the port side.',
      'Masters must confirm their estimated time of arrival six hours ahead and again one hour ahead on VHF channel 12. A ship that misses its boarding window by more than thirty minutes loses its slot and is given the next free one, which at busy times may mean waiting for the following tide.',
    ],
  },
  {
    heading: 'Tidal windows',
    paragraphs: [
      'Deep-draught ships, drawing more than nine metres, may only enter between two hours before and one hour after high water. The harbour office publishes the daily windows at six in the morning, corrected for the measured height of tide at the Ost bridge gauge, which can differ from the prediction by thirty centimetres after strong westerly winds.',
      'Outbound sailings follow the same rule in reverse. The pilot leaves the ship at the outer buoy, never inside the channel, and the cutter returns to the inner harbour to wait for the next movement.',
    ],
  },
  {
    heading: 'Fees',
    paragraphs: [
      'Pilotage is charged per movement by gross tonnage, with a surcharge of twenty-five percent for movements between ten at night and six in the morning. Cancellations made less than two hours before the boarding time are charged at half the normal rate. Fishing vessels registered in Velmora are exempt.',
    ],
  },
];

const MARKET: Section[] = [
  {
    paragraphs: [
      'The Ostmund fish market opens at four in the morning, six days a week, in the old customs hall on the north quay of Velmora. About forty boats land their catch there; most of it is cod, plaice, mackerel and brown shrimp, sold by Dutch auction to wholesalers, restaurants and the fish counters of the town.',
    ],
  },
  {
    heading: 'Keeping the cold chain',
    paragraphs: [
      'Fish must be gutted at sea and iced in boxes of no more than forty kilograms. On the quay the boxes go straight into the chilled hall, which is kept between zero and two degrees Celsius. A box found above four degrees at the landing check is set aside and may only be sold for processing, not for the fresh counter.',
      'Every box carries a label with the vessel number, the fishing area and the landing time. The market keeps these records for two years, so that a restaurant can trace a single fillet back to the boat that caught it.',
    ],
  },
  {
    heading: 'Quality grades',
    paragraphs: [
      'Graders score each lot from one to three on eyes, gills, skin and smell. Grade one fish fetch the best prices and go mostly to restaurants; grade three is sold to the smokehouses on the south quay. Disputes over grading are settled by the market master before the auction of the lot begins.',
    ],
  },
];

const NOTICE = [
  "HARBOUR MASTER'S NOTICE No. 14",
  'Dredging of the northern channel',
  'From Monday 3 March the dredger Grete will deepen the northern channel between buoys N4 and N9. Work continues day and night for about three weeks.',
  'Ships must pass the dredger at slow speed and keep to the south side of the channel. The dredger shows two green lights on the side where ships may pass.',
  'During the works the tidal window for ships drawing more than nine metres is shortened by thirty minutes at each end.',
  'Questions: Velmora harbour office, VHF channel 12.',
];

const MARKDOWN = `# Pilot boat maintenance guide

This guide covers routine care of the Velmora pilot cutters *Ostwind* and *Kessel*, both
14-metre aluminium boats with twin diesel engines and water jets. The crews keep a log of every
check, and the harbour engineer reviews the logs each Friday.

## Daily checks

Before the first movement of the day the duty coxswain checks engine oil and coolant levels,
bilge pumps, navigation lights, the radar and both VHF radios. The boarding ladder and the
recovery sling are inspected for wear, and the man-overboard recovery frame is test-fitted once.
Any fault that affects boarding safety takes the boat out of service until it is fixed.

## Weekly work

Once a week the water-jet intakes are cleared of weed and plastic, the fuel filters are drained
of water, and the fenders along the boarding side are checked for splits. Batteries are load
tested on Mondays. The crews also run a man-overboard drill, alternating day and night.

## Winter lay-up

Each boat spends two weeks out of the water in January, one after the other, so that one cutter
is always available. During lay-up the hull is cleaned and its anodes replaced, the jets are
overhauled, and the engines get new impellers and belts. The boat is only returned to service
after a sea trial with the harbour engineer aboard, including a full-speed run and a crash stop.

## Records

Logs are kept for five years. A missing daily check must be explained in writing to the
harbour engineer, who decides whether the boat may keep working.
`;

/** The notice typeset as a page, rendered at 150 dpi and stored as a bilevel-looking greyscale scan. */
async function scannedNotice(): Promise<Uint8Array> {
  const lines: TextLineSpec[] = [];
  let y = 110;
  NOTICE.forEach((paragraph, index) => {
    const size = index === 0 ? 18 : index === 1 ? 15 : 13;
    for (const line of wrapText(paragraph, MEASURE, size)) {
      lines.push({ text: line, x: MARGIN, y, size, bold: index < 2 });
      y += size * 1.45;
    }
    y += 12;
  });
  const doc = await openPdf(writePdf([{ ...PAGE, lines }]));
  const png = await renderPdfPage(doc, 1, 150);
  await doc.destroy();
  // Thresholded like a fax-mode scan: a plain black-and-white page compresses to a few kilobytes.
  const { data, info } = await sharp(png).greyscale().threshold(160).raw().toBuffer({ resolveWithObject: true });
  return writePdf([{ ...PAGE, image: { width: info.width, height: info.height, pixels: new Uint8Array(data) } }], { title: "Harbour master's notice No. 14" });
}

async function main(): Promise<void> {
  const files: Record<string, Uint8Array | string> = {
    'velmora-pilotage.pdf': writePdf(layout('Harbour pilotage at Velmora', PILOTAGE), { title: 'Harbour pilotage at Velmora', author: 'Velmora harbour office' }),
    'ostmund-fish-market.pdf': writePdf(layout('The Ostmund fish market', MARKET), { title: 'The Ostmund fish market', author: 'Velmora harbour office' }),
    'notice-14-dredging-scan.pdf': await scannedNotice(),
    'pilot-boat-maintenance.md': MARKDOWN,
  };
  for (const [name, content] of Object.entries(files)) {
    writeFileSync(join(OUT, name), content);
    console.log(`${join('examples/docs', name)}  ${typeof content === 'string' ? Buffer.byteLength(content) : content.length} bytes`);
  }
}

await main();
