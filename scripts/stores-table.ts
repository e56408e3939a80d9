// Prints the backends table of docs/storage.md from adapters/stores/registry.ts; with --write, replaces it there.
import { readFileSync, writeFileSync } from 'node:fs';
import { renderStoresTable, withStoresTable } from '../adapters/stores/registry-table.js';

const pagePath = new URL('../docs/storage.md', import.meta.url);
if (process.argv.includes('--write')) {
  const updated = withStoresTable(readFileSync(pagePath, 'utf8'));
  if (updated === null) {
    process.stderr.write('docs/storage.md has no stores-table markers\n');
    process.exit(1);
  }
  writeFileSync(pagePath, updated);
} else {
  process.stdout.write(`${renderStoresTable()}\n`);
}
