import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { started, type StoreHarness } from './harness.js';

/** file:// JSON Lines in a temp folder; stored vectors read from the files as plain JSON. */
export function fileHarness(): StoreHarness {
  let dir: string | undefined;
  /** The files read as plain JSON Lines: a row's `vector` is the type's values as JSON numbers. */
  const storedRows = async (table: string): Promise<Record<string, unknown>[]> => {
    const folder = join(started(dir, 'file'), table);
    const names = (await readdir(folder)).filter((name) => name.endsWith('.jsonl'));
    const lines = await Promise.all(names.map(async (name) => (await readFile(join(folder, name), 'utf8')).trim().split('\n').slice(1)));
    return lines.flat().map((line) => JSON.parse(line) as Record<string, unknown>);
  };
  return {
    serves: 'JSON Lines in a temp folder',
    start: async () => {
      dir = await mkdtemp(join(tmpdir(), 'shoal-jsonl-'));
    },
    stop: async () => {
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    },
    uri: (table) => `${pathToFileURL(started(dir, 'file')).href}?table=${table}`,
    contract: {
      storedVectors: {
        read: async (table, id) => z.array(z.number()).parse((await storedRows(table)).find((row) => row.id === id)?.vector),
        storage: async (table) => JSON.stringify(JSON.parse(await readFile(join(started(dir, 'file'), table, '_spec.json'), 'utf8')).vectorType),
        native: { float32: '"float32"', float16: '"float16"', int8: '"int8"', uint8: '"uint8"', binary: '"binary"', ubinary: '"ubinary"' },
      },
    },
  };
}
