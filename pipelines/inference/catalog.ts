import { readdir, readFile, stat } from 'node:fs/promises';
import { extname, join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { parseWith } from '../../adapters/protocol/validate.js';
import { ProfileOverrides } from '../../adapters/models/profile.js';

/**
 * The model catalog: names callers use, mapped to a model reference plus overrides of what is
 * detected from the model's files. One YAML/JSON file with a `models:` map, or a folder of
 * one-model files (`org__name.yaml` with a `name:` key). Unknown keys are errors, not silence.
 */

export const CatalogEntry = ProfileOverrides.extend({
  /** Model reference: hub id `org/name[@rev]` or a local folder. Defaults to the entry's name. */
  source: z.string().min(1).optional(),
  description: z.string().optional(),
});
export type CatalogEntry = z.infer<typeof CatalogEntry>;

const CatalogFile = z.strictObject({
  models: z.record(z.string().min(1), CatalogEntry).default({}),
});

const SingleModelFile = CatalogEntry.extend({ name: z.string().min(1) });

export interface Catalog {
  readonly entries: ReadonlyMap<string, CatalogEntry>;
}

export const EMPTY_CATALOG: Catalog = Object.freeze({ entries: new Map<string, CatalogEntry>() });

function parseText(text: string, file: string): unknown {
  try {
    return extname(file).toLowerCase() === '.json' ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `catalog file ${file} is not valid ${extname(file) === '.json' ? 'JSON' : 'YAML'}: ${String(error)}`, {
      cause: error,
    });
  }
}

export function parseCatalog(data: unknown, what: string): Catalog {
  const parsed = parseWith(CatalogFile, data, `catalog ${what}`, ErrorCode.CONFIG_INVALID);
  return Object.freeze({ entries: new Map(Object.entries(parsed.models)) });
}

/** Loads a catalog file, or every .yaml/.yml/.json file of a folder (one model each). */
export async function loadCatalog(path: string): Promise<Catalog> {
  let info;
  try {
    info = await stat(path);
  } catch (error) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `catalog ${path} does not exist`, { cause: error });
  }
  if (!info.isDirectory()) return parseCatalog(parseText(await readFile(path, 'utf8'), path), path);
  const entries = new Map<string, CatalogEntry>();
  const files = (await readdir(path)).filter((f) => /\.(ya?ml|json)$/i.test(f)).sort();
  for (const file of files) {
    const full = join(path, file);
    const { name, ...entry } = parseWith(SingleModelFile, parseText(await readFile(full, 'utf8'), full), `catalog file ${full}`, ErrorCode.CONFIG_INVALID);
    if (entries.has(name)) throw new ShoalError(ErrorCode.CONFIG_INVALID, `catalog folder ${path}: model "${name}" is defined twice`);
    entries.set(name, entry);
  }
  return Object.freeze({ entries });
}
