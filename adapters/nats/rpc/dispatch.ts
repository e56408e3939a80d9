import type { Engine } from '../../protocol/engine.js';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { REQUEST_SCHEMAS } from '../../protocol/jobs.js';
import { isImageItem, TokenizeRequest, type Priority } from '../../protocol/requests.js';
import type { EncodeResult, ExtractResult, ScoreResult, TokenizeResult } from '../../protocol/results.js';
import type { Primitive, RpcOperation } from '../../protocol/subjects.js';
import { parseWith } from '../../protocol/validate.js';

/**
 * Runs one primitive request from a NATS message on an Engine: validates it against the
 * primitive's schema, checks that it names the model its subject was for (a request must not
 * reach a model through another model's consumer), and sets the scheduling lane.
 */

export type AnyResult = EncodeResult | ScoreResult | ExtractResult;

export interface Dispatch {
  primitive: Primitive;
  /** The model of the subject or job part the request came through. */
  model: string;
  request: unknown;
  priority: Priority;
  signal?: AbortSignal | undefined;
  /**
   * Encode only: copy each text item's input into its result item (`text`). Set for jobs whose
   * results become index rows, the only consumer that needs the texts back.
   */
  inputTexts?: boolean | undefined;
  /** Encode: refuse dense results over this many bytes before any inference (CallOptions.maxResultBytes). */
  maxResultBytes?: number | undefined;
}

function checkModel(requested: string, expected: string): void {
  if (requested !== expected) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `the request names model "${requested}" but was sent for model "${expected}"`);
  }
}

/** Items in a request (for status counts), 0 when it has none. */
export function itemCount(request: unknown): number {
  if (request === null || typeof request !== 'object' || !('items' in request)) return 0;
  return Array.isArray(request.items) ? request.items.length : 0;
}

export async function runPrimitive(engine: Engine, call: Dispatch): Promise<AnyResult> {
  const options = { signal: call.signal, maxResultBytes: call.maxResultBytes };
  switch (call.primitive) {
    case 'encode': {
      const request = parseWith(REQUEST_SCHEMAS.encode, call.request, 'encode request');
      checkModel(request.model, call.model);
      const result = await engine.encode({ ...request, priority: call.priority }, options);
      if (call.inputTexts === true) {
        for (const item of result.items) {
          const input = request.items[item.index];
          if (input !== undefined && !isImageItem(input)) item.text = input.text;
        }
      }
      return result;
    }
    case 'score': {
      const request = parseWith(REQUEST_SCHEMAS.score, call.request, 'score request');
      checkModel(request.model, call.model);
      return engine.score({ ...request, priority: call.priority }, options);
    }
    case 'extract': {
      const request = parseWith(REQUEST_SCHEMAS.extract, call.request, 'extract request');
      checkModel(request.model, call.model);
      return engine.extract({ ...request, priority: call.priority }, options);
    }
  }
}

/** A request-reply call: a primitive, or tokenize (which has no job form). */
export async function runOperation(
  engine: Engine,
  call: Omit<Dispatch, 'primitive'> & { operation: RpcOperation },
): Promise<AnyResult | TokenizeResult> {
  const { operation, ...rest } = call;
  if (operation !== 'tokenize') return runPrimitive(engine, { ...rest, primitive: operation });
  const request = parseWith(TokenizeRequest, call.request, 'tokenize request');
  checkModel(request.model, call.model);
  return engine.tokenize(request, { signal: call.signal });
}

/**
 * Moves result indexes of a part by the part's offset, so they index the whole job's items.
 * Changes the result in place: it is the engine's fresh object, and copying large vectors costs.
 */
export function shiftIndexes(result: AnyResult, offset: number): AnyResult {
  if (offset === 0) return result;
  const entries = 'scores' in result ? result.scores : result.items;
  for (const entry of entries) entry.index += offset;
  return result;
}
