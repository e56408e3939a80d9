import type { FamilySpec } from '../family-spec.js';

/** ColBERT: a checkpoint with artifact.metadata, or the HF_ColBERT architecture. */

export const colbertSpec: FamilySpec = {
  capabilities: { encode: ['multivector'], defaultOutputs: ['multivector'], score: 'embeddings', extract: false },

  match(evidence) {
    // Above dense's sentence-transformers match: ColBERT checkpoints may carry modules.json too.
    if (evidence.folder.has('artifact.metadata')) return 150;
    if (evidence.config?.architectures?.includes('HF_ColBERT') === true) return 150;
    return 0;
  },
};
