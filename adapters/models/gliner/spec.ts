import type { FamilySpec } from '../family-spec.js';

/** GLiNER: the folder has gliner_config.json (nothing else looks like it). */

export const glinerSpec: FamilySpec = {
  capabilities: { encode: [], defaultOutputs: [], score: null, extract: true },

  match(evidence) {
    return evidence.folder.has('gliner_config.json') ? 1000 : 0;
  },
};
