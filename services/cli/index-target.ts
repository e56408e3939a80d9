import type { CliApp } from './app.js';

/**
 * `--index VALUE` of `shoal index` and `shoal search`: a name configured in SHOAL_INDEXES
 * (`docs=/srv/index,...`, as the gateway and the workers name indexes) stands for its target;
 * anything else is a folder or URI as before. A configured name wins over a folder of the same
 * name in the current directory (write `./docs` for the folder).
 */
export function resolveIndexTarget(app: CliApp, value: string): string {
  const named = app.settings.indexes ?? {};
  return Object.hasOwn(named, value) ? (named[value] ?? value) : value;
}
