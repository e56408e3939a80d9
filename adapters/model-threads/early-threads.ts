import type { Worker } from 'node:worker_threads';
import { siblingModule, spawnThread } from '../runtime/spawn.js';

/**
 * A model thread and a prep thread started by bin/shoal.js before the CLI's own modules load,
 * for the commands that run a model in process. Each thread spends 0.3-0.45 s importing its
 * modules (zod, onnxruntime, the tokenizers), and started by the engine they began only once the
 * main thread had finished its own imports (0.65 s): on two cores the imports now overlap,
 * which takes about 0.4 s off every such command. The engine adopts them (ModelThreads,
 * PrepPool) the first time it needs a thread, and starts its own when there is none; a thread
 * never adopted (`shoal encode --help`, a failure before any model is needed) ends with the
 * process. The prep thread starts without its image policy: PrepPool sends it first.
 */

type EarlyKind = 'model' | 'prep';

interface EarlyThread {
  worker: Worker;
  failed: boolean;
}

const started = new Map<EarlyKind, EarlyThread>();

function start(kind: EarlyKind): EarlyThread {
  const worker = spawnThread(siblingModule(import.meta.url, kind === 'model' ? 'model-thread' : 'prep-thread'), {
    name: kind === 'model' ? 'shoal-model' : 'shoal-prep-0',
  });
  const thread: EarlyThread = { worker, failed: false };
  // Until it is adopted nobody else listens: an 'error' event nobody hears would end the process.
  worker.on('error', () => {
    thread.failed = true;
  });
  worker.once('exit', () => {
    thread.failed = true;
  });
  // Not adopted, it must not keep the process alive.
  worker.unref();
  return thread;
}

export function startEarlyThreads(): void {
  for (const kind of ['model', 'prep'] as const) if (!started.has(kind)) started.set(kind, start(kind));
}

/** The early thread of this kind, once (null when none was started or it failed to start). */
export function adoptEarlyThread(kind: EarlyKind): Worker | null {
  const thread = started.get(kind);
  if (thread === undefined) return null;
  started.delete(kind);
  if (thread.failed) {
    void thread.worker.terminate();
    return null;
  }
  return thread.worker;
}
