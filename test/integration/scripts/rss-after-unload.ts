import { canReturnFreedMemory } from '../../../adapters/runtime/native-memory.js';
import { InferenceEngine } from '../../../pipelines/inference/engine.js';
import { nativeTrimFromEnv } from '../../../services/settings/environment.js';

/**
 * Child process for pool-memory.test.ts: loads a model, runs batches and unloads it, several times,
 * and prints RSS (bytes) at each step as one JSON line, and whether memory is handed back with
 * malloc_trim.
 *
 * Before the baseline it loads, runs and unloads another, tiny model (`warmModel`): the first
 * session of a process pays once for onnxruntime itself (its library's code paged in, its process
 * environment and threads: 30-50 MB measured), which no unload gives back and which is not the
 * measured model's memory. Counted in the model's growth and residue, it put the residue at about
 * half the growth, right at the test's bound, whatever the model did.
 */
const model = process.argv[2] ?? '';
const warmModel = process.argv[3] ?? '';
const cycles = Number(process.argv[4] ?? 3);
const rss = (): number => process.memoryUsage.rss();
// Give the allocator a moment to hand pages back after a model's thread exits.
const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 300));
// As the services do: SHOAL_NATIVE_TRIM=0 turns the addon off.
const trim = canReturnFreedMemory() && nativeTrimFromEnv(process.env);
const engine = new InferenceEngine({ runtime: { intraOpThreads: 1, returnFreedMemory: trim }, maxBatchTokens: 2048 });
const texts = Array.from({ length: 64 }, (_, i) => `document ${i} ` + 'the quick brown fox jumps over the lazy dog '.repeat(12));
await engine.tokenize({ model, items: ['warm up the tokenizer'] });
const cold = rss();
await engine.encode({ model: warmModel, items: texts.slice(0, 4), priority: 'bulk' });
await engine.unload(warmModel);
await settle();
const base = rss();
const steps: { loaded: number; unloaded: number }[] = [];
for (let cycle = 0; cycle < cycles; cycle++) {
  await engine.encode({ model, items: texts, priority: 'bulk' });
  const loaded = rss();
  await engine.unload(model);
  await settle();
  steps.push({ loaded, unloaded: rss() });
}
await engine.close();
console.log(JSON.stringify({ cold, base, cycles: steps, trim }));
