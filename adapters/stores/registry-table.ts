import { STORES } from './registry.js';
import type { StoreBackend } from './store-backend.js';

/**
 * The backends table of docs/storage.md, rendered from the registry: a new backend appears there
 * by being registered. `npx tsx scripts/stores-table.ts --write` refreshes it between the markers
 * below; a unit test (test/unit/adapters/stores/registry.test.ts) fails when it is stale.
 */

export const STORES_TABLE_START = '<!-- stores-table:start (generated from adapters/stores/registry.ts) -->';
export const STORES_TABLE_END = '<!-- stores-table:end -->';

const yes = (value: boolean): string => (value ? 'yes' : '**no**');

function row(store: StoreBackend): string {
  const forms = store.forms.map((form) => (form.includes('://') ? `\`${form}\`` : form)).join(', ');
  const variables = Object.values(store.settings).flatMap((spec) => spec.env.map((name) => `\`${name}\``));
  const { capabilities } = store;
  return `| \`${store.name}\` | ${forms} | ${store.summary} | ${capabilities.search === 'ann' ? 'ANN index' : 'exact scan'} | ${yes(capabilities.fullText)} | ${yes(capabilities.metadataFilters)} | ${yes(capabilities.sizes)} | ${capabilities.embedded ? 'embedded' : 'server'} | ${[...new Set(variables)].join(', ') || '—'} |`;
}

export function renderStoresTable(): string {
  return [
    STORES_TABLE_START,
    '| backend | `--index` | what it is | search | `--mode text` | metadata filters | sizes in `shoal index stats` | runs | settings |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...STORES.map(row),
    STORES_TABLE_END,
  ].join('\n');
}

/** The page with its backends table replaced by a fresh rendering (null when the markers are missing). */
export function withStoresTable(page: string): string | null {
  const start = page.indexOf(STORES_TABLE_START);
  const end = page.indexOf(STORES_TABLE_END);
  if (start === -1 || end === -1 || end < start) return null;
  return `${page.slice(0, start)}${renderStoresTable()}${page.slice(end + STORES_TABLE_END.length)}`;
}
