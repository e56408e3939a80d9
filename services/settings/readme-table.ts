import { SETTINGS, type SettingSpec } from './table.js';

/**
 * The settings table of docs/configuration.md (it was the README's), rendered from settings/table.ts. That page holds it between the
 * markers below; `npx tsx scripts/settings-table.ts --write` refreshes it and a unit test fails
 * when it is stale.
 */

export const README_TABLE_START = '<!-- settings-table:start (generated from services/settings/table.ts) -->';
export const README_TABLE_END = '<!-- settings-table:end -->';

function shownDefault(spec: SettingSpec): string {
  if (spec.shown !== undefined) return spec.shown;
  if (spec.default === null) return 'none';
  return `\`${String(spec.default)}\``;
}

export function renderSettingsTable(): string {
  const rows = Object.values(SETTINGS).map((spec: SettingSpec) => {
    const variables = spec.env.map((name) => `\`${name}\``).join(', ');
    const flag = spec.flag === undefined ? '' : `\`${spec.flag}\``;
    return `| ${variables} | ${flag} | ${spec.usedBy.join(', ')} | ${spec.meaning} | ${shownDefault(spec)} |`;
  });
  return [README_TABLE_START, '| variable | flag | used by | meaning | default |', '| --- | --- | --- | --- | --- |', ...rows, README_TABLE_END].join('\n');
}

/** The README with its settings table replaced by a fresh rendering (null when the markers are missing). */
export function withSettingsTable(readme: string): string | null {
  const start = readme.indexOf(README_TABLE_START);
  const end = readme.indexOf(README_TABLE_END);
  if (start < 0 || end < start) return null;
  return readme.slice(0, start) + renderSettingsTable() + readme.slice(end + README_TABLE_END.length);
}
