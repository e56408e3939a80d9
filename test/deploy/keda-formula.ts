import type { JszConsumer, JszStream } from './processes.js';

/**
 * KEDA's scaling decision for one ScaledObject, as its nats-jetstream and prometheus scalers and
 * the HPA it creates compute it (KEDA docs and scaler source):
 * - nats-jetstream: lag = num_pending + num_ack_pending of the named consumer in /jsz; a missing
 *   consumer made older KEDA report the stream's last sequence (hence "scaled to max");
 * - active when any trigger's value > its activation threshold;
 * - active: the HPA wants max over triggers of ceil(value / threshold), clamped to [1, max], and
 *   lowers its wish only after the scale-down stabilization window (the chart sets it to the cooldown);
 * - inactive for cooldownPeriod: KEDA scales the Deployment to minReplicaCount (0).
 */

export interface TriggerSpec {
  threshold: number;
  activation: number;
}

export interface ScalerSpec {
  min: number;
  max: number;
  cooldownMs: number;
  stabilizationMs: number;
}

/** The value the nats-jetstream scaler reads for `consumer` (KEDA: getMaxMsgLag). */
export function natsLag(stream: JszStream | null, consumer: string): number {
  if (stream === null) return 0;
  const found: JszConsumer | undefined = stream.consumers.find((c) => c.name === consumer);
  return found === undefined ? stream.lastSeq : found.num_pending + found.num_ack_pending;
}

export class KedaScaler {
  readonly #spec: ScalerSpec;
  #lastActiveAt = Number.NEGATIVE_INFINITY;
  #recommendations: Array<{ at: number; replicas: number }> = [];
  #replicas: number;

  constructor(spec: ScalerSpec, initialReplicas = 0) {
    this.#spec = spec;
    this.#replicas = initialReplicas;
  }

  get replicas(): number {
    return this.#replicas;
  }

  /** One polling round: trigger values with their specs → the replica count KEDA and the HPA set. */
  step(now: number, values: ReadonlyArray<{ value: number; trigger: TriggerSpec }>): number {
    const active = values.some(({ value, trigger }) => value > trigger.activation);
    if (active) this.#lastActiveAt = now;
    if (!active && now - this.#lastActiveAt >= this.#spec.cooldownMs) {
      this.#replicas = this.#spec.min;
      this.#recommendations = [];
      return this.#replicas;
    }
    if (this.#replicas === 0 && !active) return 0;
    const wanted = Math.max(...values.map(({ value, trigger }) => Math.ceil(value / trigger.threshold)));
    const recommendation = Math.min(this.#spec.max, Math.max(1, wanted));
    this.#recommendations.push({ at: now, replicas: recommendation });
    this.#recommendations = this.#recommendations.filter((r) => now - r.at <= this.#spec.stabilizationMs);
    // Up at once; down only to the highest recommendation of the stabilization window.
    const stabilized = Math.max(...this.#recommendations.map((r) => r.replicas));
    this.#replicas = recommendation >= this.#replicas ? recommendation : Math.min(this.#replicas, stabilized);
    return this.#replicas;
  }
}
