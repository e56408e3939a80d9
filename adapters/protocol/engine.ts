import type { EncodeRequest, ExtractRequest, ScoreRequest, TokenizeRequest } from './requests.js';
import type { EncodeResult, ExtractResult, ScoreResult, TokenizeResult, TypedEncodeResult } from './results.js';

/** Per-call options that are not part of the wire request. */
export interface CallOptions {
  /** Aborting drops queued work of this call and rejects it with CANCELLED. */
  signal?: AbortSignal;
  /**
   * Encode: the most bytes the caller can carry back. A request whose dense vectors alone would
   * take more (items × dimensions × bytes per value, a lower bound of any encoding of the reply)
   * is refused with INPUT_TOO_LARGE once the model's dimension is known, before any inference:
   * a NATS reply over the server's max_payload could never be sent, and computing it first only
   * tied up the worker. Implementations that have no such limit ignore it.
   */
  maxResultBytes?: number;
}

/**
 * The three primitives, implemented in-process (pipelines/inference) and over NATS
 * (adapters/nats engine-client); pipelines depend only on this interface.
 */
export interface Engine {
  encode(request: EncodeRequest, options?: CallOptions): Promise<EncodeResult>;
  /**
   * `encode` with dense vectors as typed arrays, where the engine has them without a copy (the
   * in-process one); a remote engine has only the wire's numbers and leaves this out.
   */
  encodeTyped?(request: EncodeRequest, options?: CallOptions): Promise<TypedEncodeResult>;
  score(request: ScoreRequest, options?: CallOptions): Promise<ScoreResult>;
  extract(request: ExtractRequest, options?: CallOptions): Promise<ExtractResult>;
  tokenize(request: TokenizeRequest, options?: CallOptions): Promise<TokenizeResult>;
  close(): Promise<void>;
}
