/**
 * Checks of the JSON the console reads from the API. The gateway's zod schemas cannot be loaded
 * here (native ES modules in the browser resolve no package names, and the console adds no
 * bundler), so each answer is narrowed by these guards before use: a field of the wrong type reads
 * as absent, never as a crash or as markup.
 */

export type Json = Record<string, unknown>;

export function isRecord(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function text(record: Json, key: string): string | undefined {
  const value = record[key];
  return typeof value === 'string' ? value : undefined;
}

export function count(record: Json, key: string): number | undefined {
  const value = record[key];
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

export function records(value: unknown): Json[] {
  return Array.isArray(value) ? value.filter(isRecord) : [];
}

export function child(record: Json, key: string): Json | undefined {
  const value = record[key];
  return isRecord(value) ? value : undefined;
}

export function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];
}
