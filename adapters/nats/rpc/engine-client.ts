import type { NatsConnection } from '@nats-io/transport-node';
import type { CallOptions, Engine } from '../../protocol/engine.js';
import { ErrorCode, ShoalError, deserializeError } from '../../protocol/errors.js';
import { abortable } from '../../support/abortable.js';
import { REQUEST_SCHEMAS, RpcReplyEnvelope, WorkerInfo } from '../../protocol/jobs.js';
import { TokenizeRequest, type EncodeRequest, type ExtractRequest, type ScoreRequest } from '../../protocol/requests.js';
import { EncodeResult, ExtractResult, ScoreResult, TokenizeResult } from '../../protocol/results.js';
import { DEFAULT_SUBJECT_PREFIX, natsNames, type NatsNames, type Primitive, type RpcOperation } from '../../protocol/subjects.js';
import { checkRemoteModelName } from '../../protocol/model-names.js';
import { parseWith } from '../../protocol/validate.js';
import { isNoResponders, isTimeout, toNatsShoalError } from '../connection/nats-errors.js';
import { decodeBody, decodeJson, encodeJson, jsonSafe, requestHeaders, workerMs } from './rpc-wire.js';

/**
 * The Engine interface over core NATS request-reply, for the gateway's search path. A request
 * goes first to `<prefix>.rpc.resident.<primitive>.<model>`, answered only by workers that hold
 * the model, so queries never wait for a load while some worker has it; when nobody holds it
 * (no responders), to `<prefix>.rpc.serving...`, answered by any worker that serves the model
 * (it loads it). Workers run these requests in the interactive lane. No responders on both
 * subjects and timeouts become UNAVAILABLE / TIMEOUT errors that say what to do.
 */

export interface NatsEngineOptions {
  /** Subject prefix. @default 'shoal' */
  prefix?: string;
  /** Wait for a worker that holds the model. @default 10000 */
  timeoutMs?: number;
  /** Wait on the fallback subject, where the worker may have to load the model first. @default 120000 */
  loadTimeoutMs?: number;
  /** Largest request body; default: the server's max_payload. */
  maxMessageBytes?: number;
}

export type RpcRoute = 'resident' | 'serving';

export interface RpcCall<R> {
  result: R;
  /** The worker that answered. */
  worker: string;
  route: RpcRoute;
  /** Milliseconds the worker spent on the call (header Shoal-Worker-Ms), when it said. */
  workerMs: number | null;
}

/** A call its caller abandoned (its reply, when it comes, is dropped). */
const CANCELLED_MESSAGE = 'the request was cancelled';

/** Quiet time that ends a discovery made to word an error (see workers()). */
export const DISCOVERY_STALL_MS = 100;

export class NatsEngine implements Engine {
  readonly names: NatsNames;
  readonly #nc: NatsConnection;
  readonly #timeoutMs: number;
  readonly #loadTimeoutMs: number;
  readonly #maxBytes: number | undefined;
  #closed = false;

  /** The connection stays the caller's: close() does not close it. */
  constructor(nc: NatsConnection, options: NatsEngineOptions = {}) {
    this.#nc = nc;
    this.names = natsNames(options.prefix ?? DEFAULT_SUBJECT_PREFIX);
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#loadTimeoutMs = options.loadTimeoutMs ?? 120_000;
    this.#maxBytes = options.maxMessageBytes;
  }

  async encode(request: EncodeRequest, options: CallOptions = {}): Promise<EncodeResult> {
    return (await this.call('encode', request, options)).result;
  }

  async score(request: ScoreRequest, options: CallOptions = {}): Promise<ScoreResult> {
    return (await this.call('score', request, options)).result;
  }

  async extract(request: ExtractRequest, options: CallOptions = {}): Promise<ExtractResult> {
    return (await this.call('extract', request, options)).result;
  }

  async tokenize(request: TokenizeRequest, options: CallOptions = {}): Promise<TokenizeResult> {
    const reply = await this.#call('tokenize', request, options);
    return parseWith(TokenizeResult, reply.result, `tokenize result from worker ${reply.worker}`, ErrorCode.INTERNAL);
  }

  /** One primitive call, with the worker that answered and the route it took. */
  call(primitive: 'encode', input: EncodeRequest, options?: CallOptions): Promise<RpcCall<EncodeResult>>;
  call(primitive: 'score', input: ScoreRequest, options?: CallOptions): Promise<RpcCall<ScoreResult>>;
  call(primitive: 'extract', input: ExtractRequest, options?: CallOptions): Promise<RpcCall<ExtractResult>>;
  async call(primitive: Primitive, input: unknown, options: CallOptions = {}): Promise<RpcCall<EncodeResult | ScoreResult | ExtractResult>> {
    const reply = await this.#call(primitive, input, options);
    const what = `${primitive} result from worker ${reply.worker}`;
    const result =
      primitive === 'encode'
        ? parseWith(EncodeResult, reply.result, what, ErrorCode.INTERNAL)
        : primitive === 'score'
          ? parseWith(ScoreResult, reply.result, what, ErrorCode.INTERNAL)
          : parseWith(ExtractResult, reply.result, what, ErrorCode.INTERNAL);
    return { ...reply, result };
  }

  async #call(primitive: RpcOperation, input: unknown, options: CallOptions): Promise<RpcCall<unknown>> {
    if (this.#closed) throw new ShoalError(ErrorCode.UNAVAILABLE, 'the NATS engine client is closed');
    const schema = primitive === 'tokenize' ? TokenizeRequest : REQUEST_SCHEMAS[primitive];
    const request: { model: string } = parseWith(schema, input, `${primitive} request`);
    const body = encodeJson(jsonSafe(request));
    const limit = this.#maxBytes ?? this.#nc.info?.max_payload ?? 1024 * 1024;
    if (body.byteLength > limit) {
      throw new ShoalError(
        ErrorCode.INPUT_TOO_LARGE,
        `the ${primitive} request is ${body.byteLength} bytes, over the NATS message limit of ${limit}; send fewer items, or submit a job (POST /v1/jobs, shoal submit)`,
        { details: { bytes: body.byteLength, limit } },
      );
    }
    const model = checkRemoteModelName(request.model);
    const reply = await abortable(this.#route(primitive, model, body), options.signal, CANCELLED_MESSAGE);
    const parsed = parseWith(RpcReplyEnvelope, reply.value, `reply of ${primitive} on ${model}`, ErrorCode.INTERNAL);
    if (!parsed.ok) throw deserializeError(parsed.error);
    return { result: parsed.result, worker: parsed.worker, route: reply.route, workerMs: reply.workerMs };
  }

  async #route(primitive: RpcOperation, model: string, body: Uint8Array): Promise<{ value: unknown; route: RpcRoute; workerMs: number | null }> {
    const resident = this.names.resident(primitive, model);
    try {
      return { ...(await this.#request(resident, body, this.#timeoutMs)), route: 'resident' };
    } catch (error) {
      if (!isNoResponders(error)) throw this.#failure(error, primitive, model, resident, this.#timeoutMs);
    }
    const serving = this.names.serving(primitive, model);
    try {
      return { ...(await this.#request(serving, body, this.#loadTimeoutMs)), route: 'serving' };
    } catch (error) {
      if (isNoResponders(error)) throw await this.#notServed(primitive, model, serving, error);
      throw this.#failure(error, primitive, model, serving, this.#loadTimeoutMs);
    }
  }

  /**
   * Nobody answers for the model: when some workers run and none serves it, the model is unknown
   * here (404 MODEL_NOT_FOUND, listing what is served: waiting will not help); when it is served
   * but not for this primitive, the operation is unsupported; with no worker at all it is an
   * outage (UNAVAILABLE, start one).
   */
  async #notServed(primitive: RpcOperation, model: string, subject: string, cause: unknown): Promise<ShoalError> {
    const workers = await this.workers(500, DISCOVERY_STALL_MS).catch(() => []);
    if (workers.length === 0) return this.#failure(cause, primitive, model, subject, this.#loadTimeoutMs);
    const served = [...new Set(workers.flatMap((w) => w.serves))].sort();
    if (served.includes(model)) {
      return new ShoalError(
        ErrorCode.UNSUPPORTED_OPERATION,
        `model "${model}" is served, but no worker answers ${primitive} for it (the model's family has no ${primitive})`,
        { details: { model, primitive } },
      );
    }
    return new ShoalError(
      ErrorCode.MODEL_NOT_FOUND,
      `no worker serves model "${model}" for ${primitive}; served models: ${served.length === 0 ? 'none' : served.join(', ')}`,
      { details: { model, primitive, served } },
    );
  }

  async #request(subject: string, body: Uint8Array, timeoutMs: number): Promise<{ value: unknown; workerMs: number | null }> {
    const msg = await this.#nc.request(subject, body, { timeout: timeoutMs, headers: requestHeaders(timeoutMs) });
    const decoded = decodeBody(msg.data, msg.headers);
    if (!decoded.ok) throw new ShoalError(ErrorCode.INTERNAL, `the reply on ${subject} cannot be read: ${decoded.reason}`);
    return { value: decoded.value, workerMs: workerMs(msg.headers) };
  }

  #failure(error: unknown, primitive: RpcOperation, model: string, subject: string, timeoutMs: number): ShoalError {
    const details = { subject, model, primitive };
    if (isNoResponders(error)) {
      return new ShoalError(
        ErrorCode.UNAVAILABLE,
        `no worker serves ${primitive} for model "${model}" (nobody listens on ${subject}); start one with: shoal worker --models ${model}`,
        { cause: error, details },
      );
    }
    if (isTimeout(error)) {
      return new ShoalError(ErrorCode.TIMEOUT, `no worker answered ${primitive} on model "${model}" within ${timeoutMs} ms (${subject})`, {
        cause: error,
        details,
      });
    }
    return toNatsShoalError(error, `${primitive} request on model "${model}"`);
  }

  /**
   * Every worker's answer on the discovery subject within `waitMs`; with `stallMs`, done once no
   * answer has come for that long after the first (workers on one NATS answer within milliseconds
   * of each other: an unknown model's 404 then takes about `stallMs`, not the whole `waitMs`).
   */
  async workers(waitMs = 500, stallMs?: number): Promise<WorkerInfo[]> {
    const out: WorkerInfo[] = [];
    let replies: AsyncIterable<{ data: Uint8Array }>;
    try {
      const until = stallMs === undefined ? { strategy: 'timer' as const } : { strategy: 'stall' as const, stall: stallMs };
      replies = await this.#nc.requestMany(this.names.workers(), new Uint8Array(0), { maxWait: waitMs, ...until });
    } catch (error) {
      if (isNoResponders(error)) return out;
      throw toNatsShoalError(error, 'list workers');
    }
    try {
      for await (const msg of replies) {
        const decoded = decodeJson(msg.data);
        const info = decoded.ok ? WorkerInfo.safeParse(decoded.value) : null;
        if (info?.success === true) out.push(info.data);
      }
    } catch (error) {
      if (!isNoResponders(error)) throw toNatsShoalError(error, 'list workers');
    }
    return out;
  }

  async close(): Promise<void> {
    this.#closed = true;
  }
}
