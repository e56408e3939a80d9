import { homedir } from 'node:os';
import { isAbsolute, resolve } from 'node:path';
import { ErrorCode, ShoalError } from '../protocol/errors.js';

/**
 * A model reference is either a local folder (`/models/x`, `./x`, `~/x`, `file:///x`) or a hub id
 * `org/name[@revision]` (a bare `name` is accepted too, as the hub's legacy ids and the models
 * directory allow). Hub ids are checked strictly so they can never escape a cache or models folder.
 */

export type ModelRef =
  | { kind: 'path'; path: string; raw: string }
  | { kind: 'hub'; repo: string; revision: string | null; raw: string };

const SEGMENT = /^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,95})$/;
const REVISION = /^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$/;

function isPathLike(value: string): boolean {
  return value.startsWith('/') || value.startsWith('./') || value.startsWith('../') || value.startsWith('~') || value.startsWith('file:') || value === '.';
}

function checkSegment(segment: string, raw: string): void {
  if (!SEGMENT.test(segment) || segment.includes('..')) {
    throw new ShoalError(
      ErrorCode.INVALID_INPUT,
      `"${raw}" is not a valid model id: use org/name[@revision] with letters, digits, '.', '_' and '-', or a path starting with / or ./`,
    );
  }
}

export function parseModelRef(raw: string): ModelRef {
  const value = raw.trim();
  if (value.length === 0) throw new ShoalError(ErrorCode.INVALID_INPUT, 'model is empty');
  if (isPathLike(value)) {
    let path = value;
    if (path.startsWith('file://')) path = decodeURIComponent(new URL(path).pathname);
    else if (path.startsWith('~')) path = homedir() + path.slice(1);
    return { kind: 'path', path: isAbsolute(path) ? resolve(path) : resolve(process.cwd(), path), raw };
  }
  const at = value.indexOf('@');
  const repo = at >= 0 ? value.slice(0, at) : value;
  const revision = at >= 0 ? value.slice(at + 1) : null;
  const segments = repo.split('/');
  if (segments.length > 2) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `"${raw}" is not a valid model id: expected org/name, got ${segments.length} path segments`);
  }
  for (const segment of segments) checkSegment(segment, raw);
  if (revision !== null && (!REVISION.test(revision) || revision.includes('..'))) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `"${raw}" has an invalid revision "${revision}"`);
  }
  return { kind: 'hub', repo, revision, raw };
}

/** `org/name` → `org--name`, the hub cache's folder naming. */
export function cacheFolderName(repo: string): string {
  return `models--${repo.split('/').join('--')}`;
}
