// Prints the README's settings table from services/settings/table.ts; with --write, replaces it in README.md.
import { readFileSync, writeFileSync } from 'node:fs';
import { renderSettingsTable, withSettingsTable } from '../services/settings/readme-table.js';

const readmePath = new URL('../README.md', import.meta.url);
if (process.argv.includes('--write')) {
  const updated = withSettingsTable(readFileSync(readmePath, 'utf8'));
  if (updated === null) {
    process.stderr.write('README.md has no settings-table markers\n');
    process.exit(1);
  }
  writeFileSync(readmePath, updated);
} else {
  process.stdout.write(`${renderSettingsTable()}\n`);
}
