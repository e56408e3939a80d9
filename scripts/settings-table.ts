// Prints the settings table of docs/configuration.md from services/settings/table.ts; with --write, replaces it there.
import { readFileSync, writeFileSync } from 'node:fs';
import { renderSettingsTable, withSettingsTable } from '../services/settings/readme-table.js';

const readmePath = new URL('../docs/configuration.md', import.meta.url);
if (process.argv.includes('--write')) {
  const updated = withSettingsTable(readFileSync(readmePath, 'utf8'));
  if (updated === null) {
    process.stderr.write('docs/configuration.md has no settings-table markers\n');
    process.exit(1);
  }
  writeFileSync(readmePath, updated);
} else {
  process.stdout.write(`${renderSettingsTable()}\n`);
}
