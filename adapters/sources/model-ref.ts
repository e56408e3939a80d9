import { homedir } from 'node:os';
import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ErrorCode, ShoalError } from '../protocol/errors.js';

/**
 * A model reference is either a local folder (`/models/x`, `./x`, `../x`, `~/x`, `file:///x`) or a
 * hub id `org/name[@revision]` (a bare `name` is accepted too, as the hub's legacy ids and the
 * models directory allow). Hub ids are checked strictly because they become folder names in the
 * models directory and the hub cache: an id must never be able to point outside them.
 */

export type ModelRef =
  | { kind: 'path'; path: string; raw: string }
  | { kind: 'hub'; repo: string; revision: string | null; raw: string };

/** One id segment, as the hub allows them: starts with a letter or digit, at most 96 characters. */
const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$/;
/** A branch, tag or commit; `/` is allowed for refs such as `refs/pr/1`. */
const REVISION_SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
const MAX_REVISION_LENGTH = 128;

const ID_HELP = "use org/name[@revision] with letters, digits, '.', '_' and '-', or a folder path starting with /, ./ or ../";

function isPathLike(value: string): boolean {
  return (
    value === '.' ||
    value === '..' ||
    value === '~' ||
    value.startsWith('/') ||
    value.startsWith('./') ||
    value.startsWith('../') ||
    value.startsWith('~/') ||
    value.startsWith('file:')
  );
}

function invalidId(raw: string, why: string): ShoalError {
  return new ShoalError(ErrorCode.INVALID_INPUT, `"${raw}" is not a valid model id (${why}): ${ID_HELP}`);
}

function checkSegment(segment: string, raw: string): void {
  if (segment.length === 0) throw invalidId(raw, 'empty path segment');
  // `..` inside a segment is refused as well: `a..b` is legal on the hub but never needed, and
  // refusing it keeps every id trivially free of traversal.
  if (!SEGMENT.test(segment) || segment.includes('..')) throw invalidId(raw, `bad segment "${segment}"`);
}

function checkRevision(revision: string, raw: string): void {
  const parts = revision.split('/');
  const valid =
    revision.length <= MAX_REVISION_LENGTH && parts.every((part) => REVISION_SEGMENT.test(part) && !part.includes('..'));
  if (!valid) {
    throw new ShoalError(
      ErrorCode.INVALID_INPUT,
      `"${raw}" has an invalid revision "${revision}": use a branch, tag or commit made of letters, digits, '.', '_', '-' and '/'`,
    );
  }
}

function localPath(value: string, raw: string): string {
  if (value.startsWith('file:')) {
    try {
      return fileURLToPath(value);
    } catch (error) {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `"${raw}" is not a usable file: URL (use file:///absolute/path)`, { cause: error });
    }
  }
  // Only `~` and `~/...` are expanded; `~user` forms are a shell feature Shoal does not imitate.
  const expanded = value === '~' || value.startsWith('~/') ? homedir() + value.slice(1) : value;
  return isAbsolute(expanded) ? resolve(expanded) : resolve(process.cwd(), expanded);
}

export function parseModelRef(raw: string): ModelRef {
  const value = raw.trim();
  if (value.length === 0) throw new ShoalError(ErrorCode.INVALID_INPUT, 'model is empty: name a catalog model, a hub id org/name or a folder path');
  if (value.includes('\0')) throw invalidId(raw, 'NUL character');
  if (isPathLike(value)) return { kind: 'path', path: localPath(value, raw), raw };
  const at = value.indexOf('@');
  const repo = at >= 0 ? value.slice(0, at) : value;
  const revision = at >= 0 ? value.slice(at + 1) : null;
  const segments = repo.split('/');
  if (segments.length > 2) throw invalidId(raw, `expected org/name, got ${segments.length} path segments`);
  for (const segment of segments) checkSegment(segment, raw);
  if (revision !== null) checkRevision(revision, raw);
  return { kind: 'hub', repo, revision, raw };
}

/** `org/name` → `models--org--name`, the hub cache's folder naming. */
export function cacheFolderName(repo: string): string {
  return `models--${repo.split('/').join('--')}`;
}
