import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { openSink, type OpenSinkOptions } from '../../adapters/sinks/open.js';
import type { Sink } from '../../adapters/sinks/sink.js';

/**
 * The indexes a gateway serves, by name (SHOAL_INDEXES `name=target,...`). A request names an
 * index, never a path: only what the operator configured is ever opened (no traversal from a
 * request body). Opening a target is one function, so other sink kinds plug in here.
 */

export const INDEX_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** What a configured index is opened with: the store credentials and S3 settings from the environment. */
export type IndexSinkOptions = Pick<OpenSinkOptions, 'credentials' | 's3'>;

/** Opens the sink of a configured target: any `--index` form (a folder = LanceDB, postgres://, chroma://, qdrant://, file://, s3://). */
export function openIndexSink(target: string, options: IndexSinkOptions = {}): Sink {
  return openSink(target, options).sink;
}

/** The target of a configured index name; NOT_FOUND names the configured ones. */
export function indexTarget(indexes: Readonly<Record<string, string>> | undefined, name: string): string {
  const target = indexes === undefined || !Object.hasOwn(indexes, name) ? undefined : indexes[name];
  if (target === undefined) {
    const known = Object.keys(indexes ?? {});
    throw new ShoalError(ErrorCode.NOT_FOUND, `no index named ${JSON.stringify(name)} on this gateway (${known.length === 0 ? 'none configured: set SHOAL_INDEXES=name=dir' : `configured: ${known.join(', ')}`})`, {
      details: { index: name, configured: known },
    });
  }
  return target;
}

/** Parses `name=target,name2=target2`; undefined when unset. */
export function parseIndexes(value: string | undefined): Record<string, string> | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const out: Record<string, string> = {};
  for (const entry of value.split(',').map((part) => part.trim()).filter((part) => part !== '')) {
    const at = entry.indexOf('=');
    const name = entry.slice(0, at).trim();
    const target = entry.slice(at + 1).trim();
    if (at <= 0 || !INDEX_NAME.test(name) || target === '') {
      throw new ShoalError(ErrorCode.CONFIG_INVALID, `SHOAL_INDEXES: ${JSON.stringify(entry)} must be name=target (name: letters, digits, _ or -, up to 64)`);
    }
    out[name] = target;
  }
  return out;
}
