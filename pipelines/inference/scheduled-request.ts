import type { Priority } from '../../adapters/protocol/requests.js';
import type { ShoalError } from '../../adapters/protocol/errors.js';
import type { ItemOutput, Prepared, RunOptions } from '../../adapters/models/family.js';
import type { CompareTo } from '../../adapters/model-threads/thread-messages.js';
import type { LoadedModel } from './loaded-model.js';
import type { Queued } from './work-queue.js';

/**
 * One request inside the scheduler: what a caller submits, the record kept while its items wait and
 * run (outputs so far, how it settles), and the key that decides which items may share a batch.
 * Apart from scheduler.ts, which decides when batches run, so the bookkeeping of a request reads in
 * one place.
 */

export interface Submission {
  model: LoadedModel;
  lane: Priority;
  items: Prepared[];
  options: RunOptions;
  compareTo?: CompareTo | undefined;
  signal?: AbortSignal | undefined;
  /** Epoch ms after which unstarted items fail with TIMEOUT. */
  deadline?: number | undefined;
}

export interface RequestState {
  id: number;
  submission: Submission;
  outputs: ItemOutput[];
  remaining: number;
  settled: boolean;
  /** Run alone after a mixed batch failed, so its own failure is final. */
  isolated: boolean;
  resolve: (outputs: ItemOutput[]) => void;
  reject: (error: ShoalError) => void;
  queued: Set<Queued<WorkItem>>;
  /** Removes the abort listener: a caller may reuse one signal for many requests. */
  detach: () => void;
}

/** The record of a request just submitted: nothing done yet, no abort listener attached. */
export function newRequest(id: number, submission: Submission, resolve: RequestState['resolve'], reject: RequestState['reject']): RequestState {
  return {
    id,
    submission,
    outputs: new Array<ItemOutput>(submission.items.length),
    remaining: submission.items.length,
    settled: false,
    isolated: false,
    resolve,
    reject,
    queued: new Set(),
    detach: () => undefined,
  };
}

/** One item of a request, as it waits in a model's queue. */
export interface WorkItem {
  request: RequestState;
  index: number;
  prepared: Prepared;
}

/** The batch key of a request's items: only items with equal keys share a batch. */
export function optionsKey(submission: Submission, id: number): string {
  // Items scored against a reference can only share a batch with that request's items.
  const compare = submission.compareTo === undefined ? '' : `#${id}`;
  return `${JSON.stringify(submission.options)}${compare}`;
}
