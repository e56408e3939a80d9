import { readFile } from 'node:fs/promises';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { buildTaxonomy, splitPath, TaxonomyFormat, type Taxonomy, type TaxonomyEntry } from './tree.js';

/**
 * Taxonomy files: Shopify (`gid://shopify/TaxonomyCategory/aa : A > B`, or any `ID : A > B`
 * text export), Google (`166 - A > B`) and plain (`A > B`, one path per line). The format is
 * recognized from the first category line and every other line must follow it, so a stray line
 * is reported with its number instead of becoming a category. `#` lines and blank lines are skipped.
 */

/** Largest taxonomy file read (the Shopify taxonomy is about 1 MB). */
export const MAX_TAXONOMY_BYTES = 64 * 1024 * 1024;

const SHOPIFY = /^(\S+)\s+:\s+(.+)$/;
const GOOGLE = /^(\d+)\s+-\s+(.+)$/;

function detect(line: string): TaxonomyFormat {
  if (GOOGLE.test(line)) return TaxonomyFormat.google;
  if (SHOPIFY.test(line)) return TaxonomyFormat.shopify;
  return TaxonomyFormat.plain;
}

/** A CSV header (`id,path`, `category_id,name`): a spreadsheet export, which is not a taxonomy text file. */
const CSV_HEADER = /^"?[A-Za-z_][\w ]*"?(,"?[A-Za-z_][\w ]*"?){1,7}$/;
const HEADER_NAMES = new Set(['id', 'path', 'name', 'category', 'categories', 'label', 'parent', 'full_path', 'category_id', 'category_name']);

function looksLikeCsvHeader(line: string): boolean {
  if (!CSV_HEADER.test(line)) return false;
  return line.split(',').some((field) => HEADER_NAMES.has(field.replaceAll('"', '').trim().toLowerCase()));
}

/**
 * A JSON object or array on a line (`{"id":1,"text":"x"}`): a JSON Lines file, such as the
 * catalog, given as the taxonomy. Read as plain paths, each record would become a category.
 */
function looksLikeJson(line: string): boolean {
  if (!line.startsWith('{') && !line.startsWith('[')) return false;
  try {
    const value: unknown = JSON.parse(line);
    return typeof value === 'object' && value !== null;
  } catch {
    return false;
  }
}

const WHAT_A_TAXONOMY_IS = 'a taxonomy is a text file with one category per line: "ID : A > B" (Shopify), "ID - A > B" (Google) or "A > B" (plain)';

function entry(line: string, format: TaxonomyFormat, where: string): TaxonomyEntry {
  if (format === TaxonomyFormat.plain) {
    // A plain file's lines carry no id: one that does means the file mixes formats (or its first line is a title).
    const other = detect(line);
    if (other !== TaxonomyFormat.plain) {
      const shape = other === TaxonomyFormat.google ? '"ID - A > B"' : '"ID : A > B"';
      throw new ShoalError(ErrorCode.INVALID_INPUT, `${where}: "${line.slice(0, 200)}" is a ${shape} line (${other} format), but the first category line has no id (plain format): the file mixes formats`);
    }
    const path = splitPath(line, where);
    return { id: path.join(' > '), path };
  }
  const match = (format === TaxonomyFormat.google ? GOOGLE : SHOPIFY).exec(line);
  if (match === null) {
    const shape = format === TaxonomyFormat.google ? '"ID - A > B"' : '"ID : A > B"';
    throw new ShoalError(ErrorCode.INVALID_INPUT, `${where}: expected ${shape} like the first category line (${format} format), got "${line.slice(0, 200)}"`);
  }
  return { id: match[1] ?? '', path: splitPath(match[2] ?? '', where) };
}

export interface ParseTaxonomyOptions {
  /** Keep categories down to this depth (1 = top level only). @default all */
  maxDepth?: number | undefined;
  /** Names the source in messages. @default 'taxonomy' */
  name?: string;
}

export function parseTaxonomy(text: string, options: ParseTaxonomyOptions = {}): Taxonomy {
  const name = options.name ?? 'taxonomy';
  let format: TaxonomyFormat | null = null;
  const entries: TaxonomyEntry[] = [];
  const lines = text.split(/\r?\n/);
  for (const [number, raw] of lines.entries()) {
    const line = raw.trim();
    if (line.length === 0 || line.startsWith('#')) continue;
    if (format === null && looksLikeCsvHeader(line)) {
      throw new ShoalError(
        ErrorCode.INVALID_INPUT,
        `${name} line ${number + 1}: "${line.slice(0, 200)}" looks like a CSV header; ${WHAT_A_TAXONOMY_IS}`,
      );
    }
    if (looksLikeJson(line)) {
      throw new ShoalError(
        ErrorCode.INVALID_INPUT,
        `${name} line ${number + 1}: "${line.slice(0, 200)}" is a JSON ${line.startsWith('[') ? 'array' : 'object'} (a JSON Lines file, such as the catalog?); ${WHAT_A_TAXONOMY_IS}`,
      );
    }
    format ??= detect(line);
    entries.push(entry(line, format, `${name} line ${number + 1}`));
  }
  if (format === null) throw new ShoalError(ErrorCode.INVALID_INPUT, `${name} has no category lines`);
  return buildTaxonomy(entries, format, { maxDepth: options.maxDepth });
}

export async function loadTaxonomyFile(path: string, options: Omit<ParseTaxonomyOptions, 'name'> = {}): Promise<Taxonomy> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (error) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `taxonomy file ${path}: cannot read it`, { cause: error });
  }
  if (bytes.byteLength > MAX_TAXONOMY_BYTES) throw new ShoalError(ErrorCode.INPUT_TOO_LARGE, `taxonomy file ${path} is over ${MAX_TAXONOMY_BYTES} bytes`);
  return parseTaxonomy(bytes.toString('utf8'), { ...options, name: `taxonomy file ${path}` });
}
