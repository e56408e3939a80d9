import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { isInsideRoot } from '../../sources/path-roots.js';

/**
 * The submit-time check of a `file://` result target: a job whose results the workers would
 * refuse to write (no file roots, or a folder outside them) is refused before anything is queued,
 * rather than having every part dead-lettered later. The path is checked as written; the worker
 * checks it again, links resolved, when it writes (payloads.ts). `s3://` and `obj://` targets
 * pass through: their checks need the store itself.
 */

export function checkFileTarget(uri: string, fileRoots: readonly string[]): void {
  if (!uri.startsWith('file://')) return;
  let path: string;
  try {
    path = resolve(fileURLToPath(uri));
  } catch (error) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `result target "${uri.slice(0, 200)}" is not a valid file:// URI (use file:///absolute/path)`, { cause: error });
  }
  const roots = fileRoots.map((root) => resolve(root));
  if (roots.length === 0) {
    throw new ShoalError(
      ErrorCode.INVALID_INPUT,
      `file:// result targets are turned off here (${path}): set the folders results may be written to with SHOAL_FILE_ROOTS (on the workers and the gateway), or leave "result" out to read the results with GET /v1/jobs/<id>/results`,
      { details: { field: 'result.uri' } },
    );
  }
  if (!roots.some((root) => isInsideRoot(root, path))) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `result target ${path} is outside the allowed file roots (${roots.join(', ')}; SHOAL_FILE_ROOTS)`, {
      details: { field: 'result.uri' },
    });
  }
}
