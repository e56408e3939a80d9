import { setTimeout as sleep } from 'node:timers/promises';
import { InferenceEngine } from '../../../pipelines/inference/engine.js';

/**
 * Child process for interactive-exit.test.ts: the first interactive request on a loaded model
 * starts creating its interactive session in the background; the engine is closed as soon as the
 * request returns and the process exits the way the CLI does (process.exit, services/cli/main.ts).
 * Everything else is warm first, so the session's creation starts at once and is still running
 * when close() is called: the interactive prep thread (an interactive request on a small model,
 * then unloaded so close has little else to do), the target's primary session (bulk lane), and
 * the spare model thread replenished after that load. Before the fix, close() returned while the
 * session was still being created and the exit killed its thread inside onnxruntime: "terminate
 * called after throwing an instance of 'Napi::Error'", exit 134, in 9 or 10 runs out of 10.
 *
 * argv: target model (a large one: its session takes a few hundred ms to create), small model.
 */
const [model = '', small = ''] = process.argv.slice(2);
const spareWaitMs = Number(process.env.SPARE_WAIT_MS ?? 2000);
const engine = new InferenceEngine({});
await engine.encode({ model: small, items: ['warm up the interactive prep thread'], priority: 'interactive' });
await engine.encode({ model, items: ['warm up the primary session'], priority: 'bulk' });
await sleep(spareWaitMs);
await engine.unload(small);
const result = await engine.encode({ model, items: ['a query'], priority: 'interactive' });
await engine.close();
console.log(JSON.stringify({ items: result.items.length }));
process.exit(0);
