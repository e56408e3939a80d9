/**
 * The one lifecycle of every long-lived part (engine, worker, gateway, sink, consumers), in the
 * words nats.js uses: a part is started (a static `start()` factory, or `start()` on an instance
 * built first), `drain()` stops taking new work and finishes what is in flight, `close()` releases
 * everything at once. Both are idempotent, and close() after drain() only releases what is left.
 */
export interface Lifecycle {
  drain(): Promise<void>;
  close(): Promise<void>;
}
