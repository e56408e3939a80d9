import { parseCatalog } from '../../../pipelines/inference/catalog.js';
import { InferenceEngine } from '../../../pipelines/inference/engine.js';

/**
 * Child process for reranker-memory.test.ts: scores `pairs` documents of about `tokens` tokens
 * with the kit's causal-LM reranker (options.rewrite as argv says) and prints the process's peak
 * RSS (bytes) before and after scoring, and the scores' range, as one JSON line.
 */
const [dir = '', rewrite = 'true', pairs = '64', tokens = '2000'] = process.argv.slice(2);
const catalog = parseCatalog({ models: { reranker: { source: dir, options: { rewrite: rewrite === 'true' } } } }, 'memory test');
const engine = new InferenceEngine({ catalog, runtime: { intraOpThreads: 2 } });
const peak = (): number => process.resourceUsage().maxRSS * 1024;
// "wxy" words are about 2 tokens each: documents of `tokens` tokens, each different.
const documents = Array.from({ length: Number(pairs) }, (_, i) =>
  Array.from({ length: Math.floor(Number(tokens) / 2) }, (_, w) => `w${String.fromCharCode(97 + ((i + w) % 26))}${String.fromCharCode(97 + ((i * 7 + w * 3) % 26))}`).join(' '),
);
await engine.tokenize({ model: 'reranker', items: [{ text: 'warm up', pair: 'the tokenizer' }] });
const before = peak();
const result = await engine.score({ model: 'reranker', query: 'which document mentions word 42?', items: documents, priority: 'bulk' });
const after = peak();
await engine.close();
const scores = result.scores.map((s) => s.score);
console.log(JSON.stringify({ before, after, items: result.scores.length, tokens: result.usage.tokens, min: Math.min(...scores), max: Math.max(...scores) }));
