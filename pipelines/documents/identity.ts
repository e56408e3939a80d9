import { createHash } from 'node:crypto';
import type { PipelineDefinition } from './definition.js';
import { FURNITURE_RULES } from '../../adapters/documents/page-furniture.js';
import { TEXT_RULES } from '../../adapters/documents/text-reader.js';
import { CHUNK_RULES } from './chunk.js';

/**
 * Deterministic identities, so a re-run recognises what it already wrote:
 * - document id = sha256 of the document's bytes (the parser's `contentHash`, computed the same way
 *   here so unchanged files are skipped before they are parsed);
 * - settings hash = the stage settings that change a chunk's rows (not where they are written);
 * - chunk id = hash of (source, document id, settings hash, chunk index). The source is part of it
 *   so that two copies of one file at different paths keep separate rows.
 */

function sha256(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

export function contentHash(bytes: Uint8Array): string {
  return sha256(bytes);
}

/** Keys sorted at every level, so property order never changes a hash. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, v]) => `${JSON.stringify(key)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Limits (maxBytes, maxPages) and the write target do not change rows, so they are left out. */
export function settingsHash(definition: PipelineDefinition): string {
  const { parse, chunk, encode, extract, classify } = definition.stages;
  const relevant = {
    // The rules' version with `drop`: documents ingested under older rules are re-read once.
    parse: { ocr: parse.ocr, ocrModel: parse.ocrModel, ocrDpi: parse.ocrDpi, furniture: parse.furniture, furnitureRules: parse.furniture === 'drop' ? FURNITURE_RULES : undefined },
    // The chunker's and the text readers' versions: rows made under older rules are remade once.
    chunk: { ...chunk, rules: CHUNK_RULES, textRules: TEXT_RULES },
    encode,
    extract,
    classify,
  };
  return sha256(canonical(relevant)).slice(0, 16);
}

export function chunkId(source: string, documentId: string, settings: string, index: number): string {
  return sha256(`${source}\u0000${documentId}\u0000${settings}\u0000${index}`).slice(0, 32);
}
