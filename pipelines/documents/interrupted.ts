import { ErrorCode, ShoalError, toShoalError } from '../../adapters/protocol/errors.js';
import { IngestSummary } from './summary.js';

/**
 * An interrupted ingest run still has a story: the documents committed, found unchanged or failed
 * before the stop. The runner's CANCELLED error carries that summary in its details (JSON-safe,
 * like every detail), so a caller can report it and then rethrow the error unchanged, keeping the
 * interrupt's exit status (130/143). Documents not reached are simply not counted; a re-run skips
 * the committed ones and continues with the rest.
 */

const SUMMARY_DETAIL = 'summary';

/** The CANCELLED error of a stopped run, with a copy of its summary so far (the original kept as cause). */
export function interruptedWith(error: ShoalError, summary: IngestSummary): ShoalError {
  // A copy: the runner's own summary object is not handed out while it could still change.
  const carried: IngestSummary = structuredClone(summary);
  return new ShoalError(ErrorCode.CANCELLED, error.message, { cause: error.cause, details: { ...error.details, [SUMMARY_DETAIL]: carried } });
}

/** The summary an interrupted run's error carries, or null (another error, or a stop before the run began). */
export function interruptedSummary(error: unknown): IngestSummary | null {
  const shoal = toShoalError(error);
  if (shoal.code !== ErrorCode.CANCELLED) return null;
  const parsed = IngestSummary.safeParse(shoal.details?.[SUMMARY_DETAIL]);
  return parsed.success ? parsed.data : null;
}

export interface SettledRun {
  summary: IngestSummary;
  /** The interrupt's error, to rethrow once the summary is written; null when the run finished. */
  interrupted: ShoalError | null;
}

/** Awaits a run; an interrupt that carries a summary settles with it instead of rejecting. */
export async function settleInterrupt(running: Promise<IngestSummary>): Promise<SettledRun> {
  try {
    return { summary: await running, interrupted: null };
  } catch (error) {
    const summary = interruptedSummary(error);
    if (summary === null) throw error;
    return { summary, interrupted: toShoalError(error) };
  }
}
