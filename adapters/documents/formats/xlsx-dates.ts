import { child, children, parseXml } from './xml.js';
import type { ZipArchive } from './zip-archive.js';

/**
 * Dates and times in a workbook. A spreadsheet stores a date as a number of days (46084 is
 * 3 March 2026) and says it is one only through the cell's number format: this finds the cell
 * styles (`s`, an index into styles.xml's cellXfs) whose format shows a date or a time, and
 * writes such values as ISO 8601 (`2026-03-03`, `2026-03-03 14:30:00`, `14:30:00`), which search
 * can match, where the raw number cannot. Other number formats (currency, percentages, decimals)
 * are not applied: those values stay as stored.
 */

export interface DateStyle {
  date: boolean;
  time: boolean;
}

/** Built-in number formats (ECMA-376 18.8.30) that show dates or times; 27-36 and 50-58 are East Asian dates. */
function builtinStyle(id: number): DateStyle | null {
  if (id >= 14 && id <= 17) return { date: true, time: false };
  if ((id >= 18 && id <= 21) || (id >= 45 && id <= 47)) return { date: false, time: true };
  if (id === 22) return { date: true, time: true };
  if ((id >= 27 && id <= 36) || (id >= 50 && id <= 58)) return { date: true, time: false };
  return null;
}

/** A custom format code's date and time parts, quoted text, escapes and [colour]/[$locale] sections aside. */
function customStyle(code: string): DateStyle | null {
  const bare = code
    .replace(/"[^"]*"/g, '')
    .replace(/\\./g, '')
    .replace(/\[(?!h\]|hh\]|m\]|mm\]|s\]|ss\])[^\]]*\]/gi, '')
    .toLowerCase();
  const time = /[hs]/.test(bare);
  // `m` is a month beside a date part and minutes beside an hour or second.
  const date = /[yd]/.test(bare) || (/m/.test(bare) && !time);
  return date || time ? { date, time } : null;
}

/** The date styles of a workbook by cell style index (none when it has no styles part), and whether it counts from 1904. */
export async function dateStyles(archive: ZipArchive, label: string, stylesPart: string | undefined, date1904: boolean): Promise<{ styles: Map<number, DateStyle>; date1904: boolean }> {
  const styles = new Map<number, DateStyle>();
  const text = stylesPart === undefined ? undefined : await archive.optionalText(stylesPart);
  if (text === undefined || stylesPart === undefined) return { styles, date1904 };
  const root = await parseXml(text, label, stylesPart);
  const custom = new Map<number, string>();
  for (const format of children(child(root, 'numFmts') ?? root, 'numFmt')) {
    const id = Number(format.attributes.numFmtId);
    if (Number.isInteger(id)) custom.set(id, format.attributes.formatCode ?? '');
  }
  for (const [index, xf] of children(child(root, 'cellXfs') ?? root, 'xf').entries()) {
    const id = Number(xf.attributes.numFmtId ?? 0);
    const code = custom.get(id);
    const style = code === undefined ? builtinStyle(id) : customStyle(code);
    if (style !== null) styles.set(index, style);
  }
  return { styles, date1904 };
}

/** The last serial Excel shows as a date (9999-12-31). */
const MAX_SERIAL = 2_958_465;
const DAY_MS = 86_400_000;
const pad = (value: number): string => String(value).padStart(2, '0');

/** A date serial as ISO 8601 for its style, or null when it is no date a spreadsheet shows. */
export function serialToIso(raw: string, style: DateStyle, date1904: boolean): string | null {
  const serial = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(serial) || serial < 0 || serial > MAX_SERIAL) return null;
  if (!style.date) {
    // A duration or time of day: hours may pass 24 (`[h]:mm`).
    const seconds = Math.round(serial * 86_400);
    return `${pad(Math.floor(seconds / 3600))}:${pad(Math.floor(seconds / 60) % 60)}:${pad(seconds % 60)}`;
  }
  // The 1900 system counts a 29 February 1900 that never was: from serial 61 on, day 25569 is 1970-01-01.
  const days = date1904 ? serial + 1462 : serial < 61 ? serial + 1 : serial;
  const when = new Date(Math.round(((days - 25569) * DAY_MS) / 1000) * 1000);
  const date = `${String(when.getUTCFullYear()).padStart(4, '0')}-${pad(when.getUTCMonth() + 1)}-${pad(when.getUTCDate())}`;
  return style.time ? `${date} ${pad(when.getUTCHours())}:${pad(when.getUTCMinutes())}:${pad(when.getUTCSeconds())}` : date;
}
