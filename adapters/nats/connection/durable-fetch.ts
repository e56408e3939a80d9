import type { ConsumerMessages, JetStreamClient, JsMsg } from '@nats-io/jetstream';
import type { Logger } from '../../observability/logger.js';
import type { Lifecycle } from '../../protocol/lifecycle.js';

/**
 * Pulls batches from one durable consumer until stopped, for the background handlers (dead-letter
 * advisories, the results sink). Each batch is drained into an array before its messages are
 * handled (slow work inside a fetch loop misses its heartbeats); a failed fetch or handler is
 * logged and retried after a pause that drain() cuts short.
 */

export interface DurableFetchOptions {
  js: JetStreamClient;
  stream: string;
  consumer: string;
  /** Messages per fetch. */
  batch: number;
  /** How long one fetch waits for messages. */
  expiresMs: number;
  /** Pause after a failure before fetching again. */
  retryMs: number;
  /** Named in the warning logged when a round fails. */
  what: string;
  handle: (message: JsMsg) => Promise<void>;
  logger?: Logger | undefined;
}

export class DurableFetchLoop implements Lifecycle {
  readonly #options: DurableFetchOptions;
  #running: Promise<void> | null = null;
  #stopped = false;
  #fetch: ConsumerMessages | null = null;
  #wake: (() => void) | null = null;

  constructor(options: DurableFetchOptions) {
    this.#options = options;
  }

  start(): void {
    this.#running ??= this.#loop();
  }

  async #loop(): Promise<void> {
    const { js, stream, consumer, batch, expiresMs, handle, logger, what } = this.#options;
    while (!this.#stopped) {
      try {
        const source = await js.consumers.get(stream, consumer);
        const messages: JsMsg[] = [];
        this.#fetch = await source.fetch({ max_messages: batch, expires: expiresMs });
        for await (const m of this.#fetch) messages.push(m);
        this.#fetch = null;
        for (const m of messages) await handle(m);
      } catch (error) {
        this.#fetch = null;
        if (this.#stopped) break;
        logger?.warn({ err: String(error) }, `${what} failed; retrying`);
        await this.#pause(this.#options.retryMs);
      }
    }
  }

  async #pause(ms: number): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.#wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.#wake = null;
  }

  /** Stops after the batch in hand. */
  async drain(): Promise<void> {
    this.#stopped = true;
    this.#wake?.();
    await this.#fetch?.close();
    await this.#running;
  }
  /** Nothing it holds can be cut short: a batch in hand is finished (its messages acked or left for redelivery). */
  close(): Promise<void> {
    return this.drain();
  }

}
