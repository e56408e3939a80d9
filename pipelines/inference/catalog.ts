import { readdir, readFile, stat } from 'node:fs/promises';
import { basename, dirname, extname, join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { parseWith } from '../../adapters/protocol/validate.js';
import { ProfileOverrides } from '../../adapters/models/profile.js';
import { parseModelRef } from '../../adapters/sources/model-ref.js';

/**
 * The model catalog: names callers use, mapped to a model reference plus overrides of what is
 * detected from the model's files. One YAML/JSON file with a `models:` map, or a folder of
 * one-model files (`org__name.yaml` with a `name:` key). Unknown keys are errors, not silence,
 * and so are duplicate names (JSON.parse alone would keep the last one quietly). Every source is
 * checked when the catalog loads, so a typo fails at startup rather than on the first request.
 */

/** Names are what callers type in requests: no spaces or control characters. */
const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}$/;
const MODEL_NAME_RULE = 'model names use letters, digits and . _ : @ / - (starting with a letter or digit, at most 200 characters)';
const ModelName = z.string().regex(MODEL_NAME, MODEL_NAME_RULE);

export const CatalogEntry = ProfileOverrides.extend({
  /** Model reference: hub id `org/name[@rev]` or a local folder. Defaults to the entry's name. */
  source: z.string().min(1).optional(),
  description: z.string().optional(),
});
export type CatalogEntry = z.infer<typeof CatalogEntry>;

const CatalogFile = z.strictObject({
  // Names are checked in parseCatalog: zod reports a bad record key only as "Invalid key in record".
  models: z.record(z.string(), CatalogEntry).default({}),
});

const SingleModelFile = CatalogEntry.extend({ name: ModelName });

export interface Catalog {
  readonly entries: ReadonlyMap<string, CatalogEntry>;
}

export const EMPTY_CATALOG: Catalog = Object.freeze({ entries: new Map<string, CatalogEntry>() });

function isJson(file: string): boolean {
  return extname(file).toLowerCase() === '.json';
}

function parseText(text: string, file: string): unknown {
  const format = isJson(file) ? 'JSON' : 'YAML';
  try {
    if (!isJson(file)) return parseYaml(text); // rejects duplicate keys itself
    const data: unknown = JSON.parse(text);
    parseYaml(text, { schema: 'json' }); // JSON is YAML: this pass only looks for duplicate keys
    return data;
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `catalog file ${file} is not valid ${format}: ${reason}`, { cause: error });
  }
}

/**
 * Checks an entry's model reference now, and anchors a relative folder path (`./models/x`) at the
 * catalog file's folder rather than at whatever folder the process was started from.
 */
function checkedEntry(name: string, entry: CatalogEntry, baseDir: string | null, where: string): CatalogEntry {
  const reference = entry.source ?? name;
  let ref: ReturnType<typeof parseModelRef>;
  try {
    ref = parseModelRef(reference);
  } catch (error) {
    const hint = entry.source === undefined ? ' (an entry without "source" uses its name as the model id; add a source)' : '';
    const reason = error instanceof Error ? error.message : String(error);
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `${where}: model "${name}": ${reason}${hint}`, { cause: error });
  }
  const source = entry.source;
  if (ref.kind !== 'path' || baseDir === null || source === undefined) return entry;
  const relativePath = source.startsWith('./') || source.startsWith('../') || source === '.' || source === '..';
  return relativePath ? { ...entry, source: resolve(baseDir, source) } : entry;
}

/** A catalog from already parsed data; `baseDir` anchors relative folder sources (default: none, they stay as written). */
export function parseCatalog(data: unknown, what: string, baseDir: string | null = null): Catalog {
  const parsed = parseWith(CatalogFile, data, `catalog ${what}`, ErrorCode.CONFIG_INVALID);
  const entries = new Map<string, CatalogEntry>();
  for (const [name, entry] of Object.entries(parsed.models)) {
    if (!MODEL_NAME.test(name)) throw new ShoalError(ErrorCode.CONFIG_INVALID, `catalog ${what}: "${name}" is not a usable model name: ${MODEL_NAME_RULE}`);
    entries.set(name, checkedEntry(name, entry, baseDir, `catalog ${what}`));
  }
  return Object.freeze({ entries });
}

async function readText(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `cannot read catalog file ${path}: ${String(error)}`, { cause: error });
  }
}

/** Catalog files of a folder: .yaml/.yml/.json, skipping hidden entries (editor swap files, Kubernetes' `..data` links). */
async function catalogFilesIn(folder: string): Promise<string[]> {
  const names = await readdir(folder, { withFileTypes: true });
  const files: string[] = [];
  for (const entry of names) {
    if (entry.name.startsWith('.') || !/\.(ya?ml|json)$/i.test(entry.name)) continue;
    const full = join(folder, entry.name);
    if (entry.isFile() || (entry.isSymbolicLink() && (await stat(full)).isFile())) files.push(full);
  }
  return files.sort();
}

/** Loads a catalog file, or every .yaml/.yml/.json file of a folder (one model each). */
export async function loadCatalog(path: string): Promise<Catalog> {
  let info;
  try {
    info = await stat(path);
  } catch (error) {
    const missing = error instanceof Error && 'code' in error && error.code === 'ENOENT';
    throw new ShoalError(ErrorCode.CONFIG_INVALID, missing ? `catalog ${path} does not exist` : `cannot read catalog ${path}: ${String(error)}`, {
      cause: error,
    });
  }
  if (!info.isDirectory()) return parseCatalog(parseText(await readText(path), path), path, dirname(resolve(path)));
  const entries = new Map<string, CatalogEntry>();
  const definedIn = new Map<string, string>();
  for (const full of await catalogFilesIn(path)) {
    const parsed = parseWith(SingleModelFile, parseText(await readText(full), full), `catalog file ${full}`, ErrorCode.CONFIG_INVALID);
    const { name, ...entry } = parsed;
    const first = definedIn.get(name);
    if (first !== undefined) {
      throw new ShoalError(ErrorCode.CONFIG_INVALID, `catalog folder ${path}: model "${name}" is defined twice (${basename(first)} and ${basename(full)})`);
    }
    definedIn.set(name, full);
    entries.set(name, checkedEntry(name, entry, dirname(resolve(full)), `catalog file ${full}`));
  }
  return Object.freeze({ entries });
}
