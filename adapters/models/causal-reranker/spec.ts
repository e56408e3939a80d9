import type { FamilySpec } from '../family-spec.js';

/**
 * Causal-LM rerankers (Qwen3-Reranker, zerank and similar): a `…ForCausalLM` graph that reads a
 * fixed chat prompt around (instruction, query, document) and answers "yes" or "no"; the score is
 * P(yes) from those two logits at the last position. config.json names a generative LM, so the
 * folder alone cannot tell a reranker from a chat model: the model's name (or its folder, such as
 * a Hugging Face cache path) must say reranker, or the catalog declares `family: causal-reranker`.
 */

const CAUSAL_LM = /ForCausalLM$/;
const RERANKER_NAME = /rerank|zerank/i;

/** Qwen3-Reranker's reference code reads at most 8,192 tokens per pair. */
export const CAUSAL_RERANKER_MAX_LENGTH = 8192;

export const causalRerankerSpec: FamilySpec = {
  capabilities: { encode: [], defaultOutputs: [], score: 'pairs', pairInstruction: true, extract: false },
  defaultMaxLength: CAUSAL_RERANKER_MAX_LENGTH,

  match(evidence) {
    const arch = evidence.config?.architectures?.[0] ?? '';
    if (!CAUSAL_LM.test(arch)) return 0;
    return RERANKER_NAME.test(evidence.name) || RERANKER_NAME.test(evidence.folder.dir) ? 95 : 0;
  },
};
