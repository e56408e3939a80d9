import { z } from 'zod';
import { flagPart, hostPart, invalidIndex, onFirstUse, parsePart, parseUrl, portPart, queryParts, tableNamePart } from './uri-parts.js';

/** `scheme://host:port/COLLECTION[?ssl=…]`, the form of the stores reached over HTTP (Chroma, Qdrant). */
const serverParts = onFirstUse(() => z.strictObject({ host: hostPart(), port: portPart(), collection: tableNamePart().optional(), ssl: flagPart().optional(), tenant: z.string().max(256).optional(), database: z.string().max(256).optional() }));

export type ServerUri = z.output<ReturnType<typeof serverParts>> & { collection: string };

/**
 * The parts of a server URI; the collection falls back to the table asked for. An API key in the
 * URI is refused: it belongs in the backend's variable, which is never printed.
 */
export function parseServerUri(uri: string, scheme: string, options: { defaultPort: number; params: readonly string[]; keyVariable: string; fallbackTable: string }): ServerUri {
  const parsed = parseUrl(uri);
  const form = `${scheme}://host:port/COLLECTION`;
  if (parsed.username !== '' || parsed.password !== '') throw invalidIndex(`${form}: put the API key in ${options.keyVariable}, not in the URI`);
  const params = queryParts(parsed, options.params, form);
  const parts = parsePart(serverParts(), {
    host: parsed.hostname,
    port: parsed.port === '' ? options.defaultPort : parsed.port,
    collection: decodeURIComponent(parsed.pathname.replace(/^\//, '')) || undefined,
    ...params,
  }, form);
  return { ...parts, collection: parts.collection ?? parsePart(tableNamePart(), options.fallbackTable, 'collection') };
}
