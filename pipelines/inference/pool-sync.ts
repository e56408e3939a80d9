/**
 * The two ways the model pool waits: exclusive sections (a load and an eviction never interleave,
 * so the RSS growth sampled during a load belongs to that model) and a change signal (a load
 * waiting for memory wakes when a lease is released or a model leaves). Apart from pool.ts because
 * they are plain promise machinery, with no knowledge of models or memory.
 */

interface Deferred<T> {
  promise: Promise<T>;
  resolve: (value: T) => void;
  reject: (error: unknown) => void;
}

/** Promise.withResolvers (Node 22+) for Node 20. */
export function deferred<T>(): Deferred<T> {
  let resolve: (value: T) => void = () => undefined;
  let reject: (error: unknown) => void = () => undefined;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Runs sections one after another, in the order they were asked for. */
export class ExclusiveSections {
  #lock: Promise<void> = Promise.resolve();

  /** Runs `work` after every earlier section has settled; a failed section does not block later ones. */
  run<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#lock.then(work);
    this.#lock = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }
}

/** Wakes everyone waiting for the next change. */
export class ChangeSignal {
  #changed = deferred<void>();

  /** Resolves at the next notify(), or after `ms` without one. */
  wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      void this.#changed.promise.then(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  notify(): void {
    const changed = this.#changed;
    this.#changed = deferred<void>();
    changed.resolve();
  }
}
