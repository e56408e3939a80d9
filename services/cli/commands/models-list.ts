import { ShoalSettings } from '../../settings/shoal-settings.js';
import { readdir, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { z } from 'zod';
import { toShoalError } from '../../../adapters/protocol/errors.js';
import { builtinModelIds } from '../../../adapters/sources/builtin-models.js';
import { modelsInDir } from '../../../adapters/sources/model-dirs.js';
import { loadCatalog } from '../../../pipelines/inference/catalog.js';
import { CliApp } from '../app.js';
import { parseFlags } from '../line-options.js';

/**
 * `shoal models list`: what can be named as a model here without a download: the catalog's
 * entries, the folders under the models directories and the built-in models, each with its
 * detected family and size on disk. Listing never downloads (a catalog entry whose model is not
 * on this machine is listed as such) and loads no ONNX session.
 */

const ListFlags = z.strictObject({ json: z.boolean().optional() });

const EXAMPLE = `
Examples:
  $ SHOAL_MODEL_DIR=test/fixtures/models shoal models list
  $ shoal --catalog deploy/catalog models list --json | jq -r 'select(.family == "dense") | .id'`;

interface ListedModel {
  id: string;
  /** The family detected from the model's files, or null when they cannot be read (see `problem`). */
  family: string | null;
  /** Bytes of the model's folder, or null when it is not on this machine. */
  bytes: number | null;
  source: 'catalog' | 'models-dir' | 'built-in';
  dir: string | null;
  problem?: string;
}

async function folderBytes(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const path = join(dir, entry.name);
    // stat follows links: hub-cache snapshots link every file to its blob.
    const info = await stat(path).catch(() => null);
    if (info === null) continue;
    total += info.isDirectory() ? await folderBytes(path) : info.size;
  }
  return total;
}

function humanBytes(bytes: number | null): string {
  if (bytes === null) return '-';
  const units = ['B', 'KB', 'MB', 'GB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}

function table(rows: readonly ListedModel[]): string {
  const cells = [['MODEL', 'FAMILY', 'SIZE', 'FROM'], ...rows.map((row) => [row.id, row.family ?? `(unusable: ${row.problem ?? '?'})`, humanBytes(row.bytes), row.source])];
  const widths = [0, 1, 2].map((column) => Math.max(...cells.map((cell) => cell[column]?.length ?? 0)));
  return cells.map((cell) => cell.map((text, column) => (column < 3 ? text.padEnd(widths[column] ?? 0) : text)).join('  ').trimEnd()).join('\n') + '\n';
}

export function registerModelsList(models: Command, app: CliApp): void {
  models
    .command('list')
    .summary('list the models of the catalog, the models directories and the built-ins, with family and size')
    .description('List what can be used as a model without a download: catalog entries, model folders under --model-dir / SHOAL_MODEL_DIR, built-in models.')
    .option('--json', 'one JSON object per line: {"id","family","bytes","source","dir"}')
    .addHelpText('after', EXAMPLE)
    .action(async (_options: unknown, self: Command) => {
      const flags = parseFlags(ListFlags, self);
      // Listing must not fetch anything: a catalog entry not on this machine is reported, not downloaded.
      const env = { ...app.settings.variables, HF_HUB_OFFLINE: '1' };
      const offline = new CliApp({ ...app.io, env, settings: ShoalSettings.of(env) });
      const config = offline.config(self);
      const candidates: Array<{ id: string; source: ListedModel['source'] }> = [];
      if (config.engine.catalog !== null) {
        for (const name of (await loadCatalog(config.engine.catalog)).entries.keys()) candidates.push({ id: name, source: 'catalog' });
      }
      for (const dir of config.engine.modelDirs) for (const id of await modelsInDir(resolve(dir))) candidates.push({ id, source: 'models-dir' });
      for (const id of builtinModelIds()) candidates.push({ id, source: 'built-in' });
      const seen = new Set<string>();
      const rows: ListedModel[] = [];
      await offline.withEngine(config, offline.progress(config), async (engine) => {
        for (const candidate of candidates) {
          if (seen.has(candidate.id)) continue;
          seen.add(candidate.id);
          try {
            const profile = await engine.profile(candidate.id);
            rows.push({ ...candidate, family: profile.family, bytes: await folderBytes(profile.dir), dir: profile.dir });
          } catch (error) {
            rows.push({ ...candidate, family: null, bytes: null, dir: null, problem: toShoalError(error).code });
          }
        }
      });
      if (flags.json === true) for (const row of rows) app.io.stdout.write(`${JSON.stringify(row)}\n`);
      else if (rows.length === 0) app.io.stdout.write('no models: set a models directory (SHOAL_MODEL_DIR / --model-dir) or a catalog (--catalog)\n');
      else app.io.stdout.write(table(rows));
    });
}
