import type { FamilySpec } from '../family-spec.js';

/** Token classification (NER): a *ForTokenClassification architecture. */

export const tokenClassificationSpec: FamilySpec = {
  capabilities: { encode: [], defaultOutputs: [], score: null, extract: true },

  match(evidence) {
    const arch = evidence.config?.architectures?.[0] ?? '';
    return arch.endsWith('ForTokenClassification') ? 100 : 0;
  },
};
