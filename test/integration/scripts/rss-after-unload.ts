import { canReturnFreedMemory } from '../../../adapters/runtime/native-memory.js';
import { InferenceEngine } from '../../../pipelines/inference/engine.js';
import { nativeTrimFromEnv } from '../../../services/settings/environment.js';

/**
 * Child process for pool-memory.test.ts: loads a model, runs batches, unloads it, and prints RSS
 * (bytes) at each step as one JSON line, and whether memory is handed back with malloc_trim.
 */
const model = process.argv[2] ?? '';
const rss = (): number => process.memoryUsage.rss();
// As the services do: SHOAL_NATIVE_TRIM=0 turns the addon off.
const trim = canReturnFreedMemory() && nativeTrimFromEnv(process.env);
const engine = new InferenceEngine({ runtime: { intraOpThreads: 1, returnFreedMemory: trim }, maxBatchTokens: 2048 });
const texts = Array.from({ length: 64 }, (_, i) => `document ${i} ` + 'the quick brown fox jumps over the lazy dog '.repeat(12));
await engine.tokenize({ model, items: ['warm up the tokenizer'] });
const base = rss();
await engine.encode({ model, items: texts, priority: 'bulk' });
const loaded = rss();
await engine.unload(model);
// Give the allocator a moment to hand pages back after the thread exits.
await new Promise((resolve) => setTimeout(resolve, 300));
const unloaded = rss();
await engine.encode({ model, items: texts.slice(0, 4), priority: 'bulk' });
const reloaded = rss();
await engine.close();
console.log(JSON.stringify({ base, loaded, unloaded, reloaded, trim }));
