import { readFileSync } from 'node:fs';
import { delimiter } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { SETTINGS, type SettingKey, type SettingSpec } from './table.js';

/**
 * The settings file (`--config FILE` or SHOAL_CONFIG): YAML or JSON, one key per setting, named as
 * in the settings table (`memoryBudget: 4GiB`, `models: [a, b]`) or as its variable
 * (`SHOAL_MEMORY_BUDGET: 4GiB`, `NATS_PASSWORD: …`). The file is turned into environment entries
 * placed under the real environment, so precedence stays flags → variables → file → defaults and
 * every service reads it through the same code that reads the variables.
 */

/** Settings whose variable holds folders (`:`-separated); other lists are comma-separated. */
const FOLDER_LISTS: ReadonlySet<SettingKey> = new Set(['modelDir', 'imageRoots', 'fileRoots']);

const Scalar = z.union([z.string(), z.number(), z.boolean()]);
const FileValue = z.union([Scalar, z.array(Scalar).max(10_000)]);
const FileShape = z.record(z.string(), FileValue);

/** Variable name → setting key, and camelCase key → its first variable. */
const KEY_OF_VARIABLE = new Map<string, SettingKey>(
  (Object.entries(SETTINGS) as [SettingKey, SettingSpec][]).flatMap(([key, spec]) => spec.env.map((name) => [name, key] as const)),
);

function variableFor(name: string): { variable: string; key: SettingKey } | null {
  if (name in SETTINGS) {
    const key = name as SettingKey;
    const variable = SETTINGS[key].env[0];
    return variable === undefined ? null : { variable, key };
  }
  const key = KEY_OF_VARIABLE.get(name);
  return key === undefined ? null : { variable: name, key };
}

function asText(value: z.infer<typeof FileValue>, key: SettingKey): string {
  if (!Array.isArray(value)) return String(value);
  return value.map(String).join(FOLDER_LISTS.has(key) ? delimiter : ',');
}

/** The file's settings as environment entries (validated: unknown keys and nested values are refused, naming the file and key). */
export function readConfigFile(path: string): Record<string, string> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `cannot read the settings file ${path} (--config / SHOAL_CONFIG): ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  let data: unknown;
  try {
    data = text.trim() === '' ? {} : parseYaml(text);
  } catch (error) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `settings file ${path} is not valid YAML or JSON: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  const parsed = FileShape.safeParse(data ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue === undefined || issue.path.length === 0 ? 'the file' : String(issue.path[0]);
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `settings file ${path}: ${where}: expected a setting name with a text, number, true/false or list value`);
  }
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(parsed.data)) {
    if (name === 'config' || name === 'SHOAL_CONFIG') throw new ShoalError(ErrorCode.CONFIG_INVALID, `settings file ${path}: a settings file cannot name another one (${name})`);
    const target = variableFor(name);
    if (target === null) {
      throw new ShoalError(ErrorCode.CONFIG_INVALID, `settings file ${path}: unknown setting "${name}" (names are those of the settings table in docs/configuration.md, e.g. memoryBudget or SHOAL_MEMORY_BUDGET)`);
    }
    out[target.variable] = asText(value, target.key);
  }
  return out;
}

/** `--config FILE` / `--config=FILE` among the arguments, else SHOAL_CONFIG; undefined when neither is given. */
export function configPathFrom(argv: readonly string[], env: NodeJS.ProcessEnv): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--') break;
    if (arg === '--config') return argv[i + 1];
    if (arg?.startsWith('--config=') === true) return arg.slice('--config='.length);
  }
  const fromEnv = env.SHOAL_CONFIG?.trim();
  return fromEnv === undefined || fromEnv === '' ? undefined : fromEnv;
}

/** The environment with the settings file's entries beneath it (a variable that is set wins over the file). */
export function withConfigFile(env: NodeJS.ProcessEnv, path: string | undefined): NodeJS.ProcessEnv {
  if (path === undefined) return env;
  const merged: NodeJS.ProcessEnv = { ...readConfigFile(path) };
  for (const [name, value] of Object.entries(env)) if (value !== undefined && value.trim() !== '') merged[name] = value;
  return merged;
}
