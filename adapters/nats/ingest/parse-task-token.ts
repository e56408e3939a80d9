import { createHash, randomBytes } from 'node:crypto';
import type { ParseTask } from '../../protocol/ingest.js';

/**
 * What ties a parse worker's answer to the task a coordinator published. A coordinator puts a
 * fresh random `token` in each task; the worker records `task` = SHA-256(token) in the document's
 * status and stores the pages under a name derived from it. The coordinator knows its tokens and
 * accepts a `parsed`/`failed` status only when `task` and `document_id` are those of the task it
 * published: a task pre-published under its run id by anyone else (who cannot know the token)
 * answers nothing it reads, and cannot overwrite the pages it reads either. The digest, not the
 * token, goes into the KV bucket, which more components can read than the parse stream.
 */

export function newParseToken(): string {
  return randomBytes(16).toString('hex');
}

/** The `task` a status answering `task` carries (undefined for a task without a token: an older coordinator). */
export function parseTaskCheck(task: Pick<ParseTask, 'token'>): string | undefined {
  return task.token === undefined ? undefined : createHash('sha256').update(task.token).digest('hex');
}

/** Where a worker stores the pages of a task (under the run's folder of the payload store). */
export function pagesKey(task: Pick<ParseTask, 'run_id' | 'doc' | 'token'>): string {
  const check = parseTaskCheck(task);
  return `ingest/${task.run_id}/${task.doc}${check === undefined ? '' : `.${check.slice(0, 16)}`}.pages.json`;
}

/** The message id of a task: with its token, so a message pre-published with `<run>.<doc>` cannot shadow it in the dedupe window. */
export function parseTaskMessageId(task: Pick<ParseTask, 'run_id' | 'doc' | 'token'>): string {
  return task.token === undefined ? `${task.run_id}.${task.doc}` : `${task.run_id}.${task.doc}.${task.token}`;
}
