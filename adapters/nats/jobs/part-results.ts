import type { JetStreamClient, JetStreamManager, PubAck } from '@nats-io/jetstream';
import { serializeError, type SerializedError } from '../../protocol/errors.js';
import { JobPartResult, WIRE_VERSION, type JobPart } from '../../protocol/jobs.js';
import { Dimensions, EmbeddingDtype } from '../../protocol/output-types.js';
import type { NatsNames } from '../../protocol/subjects.js';
import type { AnyResult } from '../rpc/dispatch.js';
import { toNatsShoalError } from '../connection/nats-errors.js';
import type { PayloadStore } from '../connection/payloads.js';
import { packReply } from '../rpc/packed-vectors.js';
import { decodeBody, encodeJson, packedHeaders } from '../rpc/rpc-wire.js';
import type { PartRecord, StatusStore } from './status-store.js';

/**
 * Finishing a part, the one place that does it (worker and dead-letter handler alike): publish
 * its result (ok or error) on the results stream with `Nats-Msg-Id` = `<job>.<part>`, so a
 * redelivered part adds no second message, then count it in the job status (once). A result over
 * the message limit, or for a store target, is written to the store and published as a reference.
 * Vectors travel float32-packed (packed-vectors.ts) unless the job asked for JSON numbers.
 */

const MESSAGE_HEADROOM = 4096;

/**
 * The `dtype`/`dimensions` an encode request asked for, for the result message (the result's
 * vectors do not say their type); nothing for float32 or another primitive's request.
 */
export function vectorShape(part: Pick<JobPart, 'primitive'>, request: unknown): Pick<JobPartResult, 'dtype' | 'dimensions'> {
  if (part.primitive !== 'encode' || typeof request !== 'object' || request === null) return {};
  const dtype = 'dtype' in request ? EmbeddingDtype.safeParse(request.dtype) : null;
  const dimensions = 'dimensions' in request ? Dimensions.safeParse(request.dimensions) : null;
  return {
    ...(dtype?.success === true && dtype.data !== 'float32' ? { dtype: dtype.data } : {}),
    ...(dimensions?.success === true ? { dimensions: dimensions.data } : {}),
  };
}

export interface PartResultsOptions {
  js: JetStreamClient;
  jsm: JetStreamManager;
  names: NatsNames;
  payloads: PayloadStore;
  status: StatusStore;
  workerId: string;
  /** Largest message body (the server's max_payload). */
  maxMessageBytes: number;
}

type ResultHeader = Pick<JobPartResult, 'v' | 'job_id' | 'part' | 'parts' | 'primitive' | 'model' | 'worker' | 'finished_at'>;

export class PartResults {
  readonly #options: PartResultsOptions;

  constructor(options: PartResultsOptions) {
    this.#options = options;
  }

  #header(part: JobPart): ResultHeader {
    return {
      v: WIRE_VERSION,
      job_id: part.job_id,
      part: part.part,
      parts: part.parts,
      primitive: part.primitive,
      model: part.model,
      worker: this.#options.workerId,
      finished_at: new Date().toISOString(),
    };
  }

  /** `body` is the message already encoded (packed when `packed`), when the caller had to encode it to measure it. */
  async #publish(part: JobPart, message: JobPartResult, body: Uint8Array = encodeJson(message), packed = false): Promise<PubAck> {
    const { js, names } = this.#options;
    try {
      return await js.publish(names.results(part.job_id, part.part), body, {
        msgID: `${part.job_id}.${part.part}`,
        expect: { streamName: names.resultsStream },
        ...(packed ? { headers: packedHeaders() } : {}),
      });
    } catch (error) {
      throw toNatsShoalError(error, `publish the result of part ${part.part} of job ${part.job_id}`);
    }
  }

  /**
   * Publishes a successful result (stored by reference when it must be) and counts the part done.
   * `request` is the part's request (inline or read from its reference): its output type goes with the result.
   */
  async ok(part: JobPart, result: AnyResult, request?: unknown): Promise<PartRecord> {
    const header = { ...this.#header(part), ...vectorShape(part, request) };
    const { payloads } = this.#options;
    let message: JobPartResult;
    let body: Uint8Array | undefined;
    let packed: Uint8Array | null = null;
    if (part.result.kind === 'store') {
      const ref = await payloads.write(part.result.uri, `${part.job_id}/part-${part.part}.jsonl`, encodeJson(result));
      message = { ...header, status: 'ok', result_ref: ref };
    } else {
      message = { ...header, status: 'ok', result };
      // Encoded once: serializing large vectors is the costliest step of publishing (packed
      // float32 unless the job asked for JSON numbers or there are no vectors).
      packed = part.result.kind === 'stream' && part.result.vectors === 'json' ? null : packReply(message);
      body = packed ?? encodeJson(message);
      if (body.byteLength > this.#options.maxMessageBytes - MESSAGE_HEADROOM) {
        const ref = await payloads.put(`results/${part.job_id}/${part.part}.json`, encodeJson(result));
        message = { ...header, status: 'ok', result_ref: ref };
        body = undefined;
      }
    }
    await this.#publish(part, message, body, body !== undefined && body === packed);
    return this.#options.status.recordPart(part, { ok: true, items: result.usage.items });
  }

  /**
   * Publishes an error result and counts the part failed, unless an earlier delivery already
   * published a successful result (crashed before its ack): then that success is what counts.
   */
  async failed(part: JobPart, failure: unknown): Promise<PartRecord> {
    const error: SerializedError = serializeError(failure);
    const ack = await this.#publish(part, { ...this.#header(part), status: 'error', error });
    if (ack.duplicate) {
      const earlier = await this.#stored(part);
      if (earlier?.status === 'ok') return this.#options.status.recordPart(part, { ok: true, items: earlier.result?.usage.items ?? 0 });
    }
    return this.#options.status.recordPart(part, { ok: false, error });
  }

  async #stored(part: JobPart): Promise<JobPartResult | null> {
    const { jsm, names } = this.#options;
    try {
      const stored = await jsm.streams.getMessage(names.resultsStream, { last_by_subj: names.results(part.job_id, part.part) });
      if (stored === null) return null;
      const decoded = decodeBody(stored.data, stored.header);
      if (!decoded.ok) return null;
      const parsed = JobPartResult.safeParse(decoded.value);
      return parsed.success ? parsed.data : null;
    } catch (error) {
      throw toNatsShoalError(error, `read the earlier result of part ${part.part} of job ${part.job_id}`);
    }
  }
}

