import type { Worker } from 'node:worker_threads';
import { siblingModule, spawnThread } from '../support/spawn-thread.js';

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

/**
 * Waits until every early thread nobody adopted has finished loading its modules (or `timeoutMs`
 * passed), then stops it. Called before the process exits: a thread torn down while it is still
 * loading onnxruntime's native binding aborts the whole process ("terminate called after throwing
 * an instance of 'Napi::Error'", no exit status), which turned a quick usage error (`shoal encode`
 * without --model, an empty folder to ingest) into a crash on a busy machine. A thread answers a
 * request only once its modules are loaded, so any answer, even an error, means it is safe to stop.
 */
export async function settleEarlyThreads(timeoutMs = 10_000): Promise<void> {
  const pending = [...started.values()].filter((thread) => !thread.failed);
  started.clear();
  await Promise.all(
    pending.map(async ({ worker }) => {
      const answered = new Promise<void>((resolve) => {
        worker.once('message', () => resolve());
        worker.once('exit', () => resolve());
        worker.once('error', () => resolve());
      });
      // A model thread answers ping; a prep thread answers it with an error: either will do.
      worker.postMessage({ id: 0, body: { type: 'ping' } });
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      });
      await Promise.race([answered, timedOut]);
      clearTimeout(timer);
      await worker.terminate();
    }),
  );
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
