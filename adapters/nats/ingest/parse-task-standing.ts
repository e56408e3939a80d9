import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { DocumentStatus, ParseTask } from '../../protocol/ingest.js';
import type { IngestStatusStore } from './ingest-store.js';
import { parseTaskCheck } from './parse-task-token.js';

/**
 * Where a parse task stands against its document's status. A coordinator writes the status
 * `queued`, naming its task (the digest of the task's token: parse-task-token.ts), before it
 * publishes the task; a worker answers only a task that status names:
 * - `open`: queued for this very task: parse it and answer;
 * - `answered`: this task was answered already (a redelivery after a lost ack): ack it as is;
 * - `foreign`: the status names another task (one published under the run id by someone who does
 *   not know the token, or an earlier coordinator's task of a run another coordinator took over):
 *   never answered;
 * - `unqueued`: no status at all: no coordinator queued this document (the same forgery, published
 *   before its victim's run, or a run whose statuses expired): never answered.
 * Answering only `open` tasks, by compare-and-set (writeAnswer), is what keeps a forged task from
 * overwriting the genuine answer: the status bucket keeps one value per key, and a value
 * overwritten right after it was written never reaches the coordinator's watch, which would then
 * wait for that document for ever.
 */
export type TaskStanding = 'open' | 'answered' | 'foreign' | 'unqueued';

export function taskStanding(existing: DocumentStatus | null, task: Pick<ParseTask, 'token' | 'document_id'>): TaskStanding {
  if (existing === null) return 'unqueued';
  if (existing.document_id !== task.document_id) return 'foreign';
  if (existing.task === parseTaskCheck(task)) return existing.state === 'queued' ? 'open' : 'answered';
  // A coordinator older than task-named `queued` statuses: its documents stay answerable (the
  // task digest still ties the answer to its task for the coordinator's own check).
  if (existing.task === undefined && existing.state === 'queued') return 'open';
  return 'foreign';
}

/** Compare-and-set attempts: only a redelivered copy of the same task or a coordinator re-queueing races an answer. */
const MAX_ANSWER_ATTEMPTS = 8;

/**
 * Writes `answer` (the task's `parsed` or `failed` status) over the task's `queued` status by
 * compare-and-set. Returns `written`, or the standing that kept it from being written (another
 * copy of the task answered first: `answered`; the status names another task: `foreign`).
 */
export async function writeAnswer(store: IngestStatusStore, task: Pick<ParseTask, 'run_id' | 'doc' | 'token' | 'document_id'>, answer: DocumentStatus): Promise<'written' | Exclude<TaskStanding, 'open'>> {
  for (let attempt = 0; attempt < MAX_ANSWER_ATTEMPTS; attempt++) {
    const entry = await store.documentEntry(task.run_id, task.doc);
    if (entry === null) return 'unqueued';
    const standing = taskStanding(entry.status, task);
    if (standing !== 'open') return standing;
    if (await store.updateDocument(answer, entry.revision)) return 'written';
  }
  throw new ShoalError(ErrorCode.UNAVAILABLE, `the status of document ${task.doc} of ingest run ${task.run_id} kept changing while a parse worker answered it; the task is retried`);
}
