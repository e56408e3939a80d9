import type { FamilySpec } from '../family-spec.js';
import type { HfConfig } from '../model-files.js';

/** Cross-encoders: a *ForSequenceClassification graph saved as a reranker. */

const ARCHITECTURE = /ForSequenceClassification$/;

export function labelCount(config: HfConfig | undefined): number {
  if (config?.num_labels !== undefined) return config.num_labels;
  const id2label = config?.id2label;
  // transformers' PretrainedConfig defaults to two labels when id2label is absent.
  return id2label === undefined ? 2 : Math.max(Object.keys(id2label).length, 1);
}

export const crossEncoderSpec: FamilySpec = {
  capabilities: { encode: [], defaultOutputs: [], score: 'pairs', extract: false },

  match(evidence) {
    const config = evidence.config;
    const arch = config?.architectures?.[0] ?? '';
    if (!ARCHITECTURE.test(arch)) return 0;
    // A one-logit head, or a model saved by sentence-transformers' CrossEncoder, is a reranker;
    // other sequence classifiers are left to classification families.
    if (config?.sentence_transformers !== undefined || labelCount(config) === 1) return 90;
    return 0;
  },
};
