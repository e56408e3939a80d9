import type { JetStreamManager, StoredMsg } from '@nats-io/jetstream';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { JobPartResult, type JobStatus } from '../../protocol/jobs.js';
import type { NatsNames } from '../../protocol/subjects.js';
import { JS_CODES, isJsApiCode, toNatsShoalError } from '../connection/nats-errors.js';
import { decodeBody } from '../rpc/rpc-wire.js';
import { TERMINAL_STATES, bitmapHas } from '../jobs/status-store.js';

/**
 * Which message on a part's results subject is that part's result. Anyone who may publish on the
 * results subjects can add messages there at any time, so the latest message is not the answer
 * (a forged `JobPartResult` without `Nats-Msg-Id`, published after the job finished, used to
 * replace what `GET /v1/jobs/:id/results` served). A worker publishes a part's result with
 * `Nats-Msg-Id: <job>.<part>` before it counts the part in the job status, and the stream drops
 * a second publish with that id inside the dedupe window: the result is the FIRST message on the
 * subject that carries that id and whose body names this job, this part and the job's shape
 * (parts, primitive, model). For a finished job only a part its status counted has a result.
 * Every other message is dropped and counted (`onDropped`), never served.
 */

const MSG_ID_HEADER = 'Nats-Msg-Id';
/** Messages looked at on one part's subject before giving up (a flood of forged ones ahead of the real one). */
const MAX_CANDIDATES = 1_000;

export interface ResultReadContext {
  jsm: JetStreamManager;
  names: NatsNames;
  /** The job's status: its shape, and for a finished job which parts were counted. */
  status: JobStatus;
  /** Called once per message dropped, with why. */
  onDropped?: (reason: string) => void;
}

/** Why `stored` is not part `part`'s result, or null when it is. */
function rejection(stored: StoredMsg, status: JobStatus, part: number): { reason: string } | { result: JobPartResult } {
  const id = stored.header?.get(MSG_ID_HEADER) ?? '';
  if (id !== `${status.job_id}.${part}`) return { reason: `message ${stored.seq} has Nats-Msg-Id ${JSON.stringify(id.slice(0, 80))}, not ${status.job_id}.${part}` };
  const decoded = decodeBody(stored.data, stored.header);
  if (!decoded.ok) return { reason: `message ${stored.seq} cannot be read: ${decoded.reason}` };
  const parsed = JobPartResult.safeParse(decoded.value);
  if (!parsed.success) return { reason: `message ${stored.seq} is not a JobPartResult` };
  const result = parsed.data;
  if (result.job_id !== status.job_id || result.part !== part || result.parts !== status.parts || result.primitive !== status.primitive || result.model !== status.model) {
    return { reason: `message ${stored.seq} names ${result.job_id} part ${result.part}/${result.parts} (${result.primitive} on "${result.model.slice(0, 80)}"), not this job's part` };
  }
  return { result };
}

/** The result of `part` (not resolved from a reference), or null when it has none. */
export async function readPartResult(context: ResultReadContext, part: number): Promise<JobPartResult | null> {
  const { jsm, names, status, onDropped } = context;
  if (part < 0 || part >= status.parts) return null;
  // A finished job's parts that were never counted (it ended at its deadline) have no result: anything there came later.
  if (TERMINAL_STATES.has(status.state) && status.counted_parts !== undefined && !bitmapHas(status.counted_parts, part)) return null;
  const subject = names.results(status.job_id, part);
  const next = (seq: number): Promise<StoredMsg | null> => nextOnSubject(jsm, names.resultsStream, subject, seq, `read result ${part} of job ${status.job_id}`);
  let seq = 1;
  for (let looked = 0; looked < MAX_CANDIDATES; looked++) {
    const stored = await next(seq);
    if (stored === null) return null;
    const verdict = rejection(stored, status, part);
    if (!('result' in verdict)) {
      onDropped?.(verdict.reason);
      seq = stored.seq + 1;
      continue;
    }
    // Whatever came after the result on its subject is not it (usually nothing: one more read).
    if (onDropped !== undefined) {
      for (let later = await next(stored.seq + 1), counted = 0; later !== null && counted < MAX_CANDIDATES; later = await next(later.seq + 1), counted++) {
        onDropped(`message ${later.seq} came after the result of part ${part} (message ${stored.seq})`);
      }
    }
    return verdict.result;
  }
  throw new ShoalError(ErrorCode.INTERNAL, `result ${part} of job ${status.job_id}: more than ${MAX_CANDIDATES} messages on its subject are not its result`);
}

/** The first message on `subject` at or after `seq`, or null. */
async function nextOnSubject(jsm: JetStreamManager, stream: string, subject: string, seq: number, what: string): Promise<StoredMsg | null> {
  // `next_by_subj` is in the server's MSG.GET request (2.9+), beside the client's typed `seq`.
  const query = { seq, next_by_subj: subject };
  try {
    return await jsm.streams.getMessage(stream, query);
  } catch (error) {
    if (isJsApiCode(error, JS_CODES.NoMessageFound)) return null;
    throw toNatsShoalError(error, what);
  }
}
