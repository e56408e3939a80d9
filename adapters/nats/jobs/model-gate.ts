import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { WorkerInfo } from '../../protocol/jobs.js';
import { checkRemoteModelName } from '../../protocol/model-names.js';
import type { Primitive } from '../../protocol/subjects.js';
import { JS_CODES, isJsApiCode, toNatsShoalError } from '../connection/nats-errors.js';
import type { Topology } from '../connection/topology.js';

/**
 * Which models a job may name: one that a running worker serves, or one whose durable consumer
 * already exists (a worker served it before: the job waits for the next one, as when KEDA scales
 * workers from zero). Anything else is refused before a status, a consumer or a part is stored,
 * so made-up names (a typo, or a caller filling the store) cost nothing: 404 MODEL_NOT_FOUND with
 * the served models, or 422 INVALID_INPUT for names that are paths.
 */

/** How long one discovery answer is reused: discovery waits for replies, submissions should not. */
const DISCOVERY_TTL_MS = 5_000;

export interface ModelGateOptions {
  topology: Topology;
  /** Every worker's discovery answer (NatsEngine.workers). */
  discover: () => Promise<readonly WorkerInfo[]>;
}

export type ModelGate = (primitive: Primitive, model: string) => Promise<void>;

export function servedModelGate(options: ModelGateOptions): ModelGate {
  let cached: { at: number; workers: Promise<readonly WorkerInfo[]> } | null = null;
  const workers = (): Promise<readonly WorkerInfo[]> => {
    if (cached === null || Date.now() - cached.at > DISCOVERY_TTL_MS) {
      const entry = { at: Date.now(), workers: options.discover() };
      entry.workers.catch(() => {
        if (cached === entry) cached = null;
      });
      cached = entry;
    }
    return cached.workers;
  };
  const { jsm, names } = options.topology;
  const hasConsumer = async (primitive: Primitive, model: string): Promise<boolean> => {
    try {
      await jsm.consumers.info(names.jobsStream, names.consumer(primitive, model));
      return true;
    } catch (error) {
      if (isJsApiCode(error, JS_CODES.ConsumerNotFound)) return false;
      throw toNatsShoalError(error, `look up the consumer of ${primitive} on "${model}"`);
    }
  };
  return async (primitive, model) => {
    checkRemoteModelName(model);
    const answers = await workers();
    const serving = answers.filter((w) => w.serves.includes(model));
    if (serving.length > 0) {
      checkOperation(serving, primitive, model);
      return;
    }
    if (await hasConsumer(primitive, model)) return;
    const served = [...new Set(answers.flatMap((w) => w.serves))].sort();
    throw new ShoalError(
      ErrorCode.MODEL_NOT_FOUND,
      `no worker serves model "${model}" (and none has before); served models: ${served.length === 0 ? 'none (no worker is running)' : served.join(', ')}`,
      { details: { model, primitive, served } },
    );
  };
}

/**
 * A model the running workers serve, but none for this primitive (an extract job on an embedder):
 * refused, as the synchronous routes refuse it, instead of a job that waits for a worker that never
 * comes. Only when every worker serving it says what it answers (older workers do not).
 */
function checkOperation(serving: readonly WorkerInfo[], primitive: Primitive, model: string): void {
  if (serving.some((w) => w.operations === undefined)) return;
  const offered = [...new Set(serving.flatMap((w) => w.operations?.[model] ?? []))].sort();
  if (offered.includes(primitive)) return;
  throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `model "${model}" is served, but not for ${primitive} (it answers ${offered.join(', ') || 'nothing'})`, {
    details: { model, primitive, offered },
  });
}
