import type { FamilySpec } from '../family-spec.js';

/** SPLADE: a sentence-transformers SpladePooling module (wins over dense), else a masked-LM head. */

const MLM_ARCHITECTURE = /ForMaskedLM$/;

export function isSpladePooling(type: string): boolean {
  return type.endsWith('.SpladePooling') || type === 'SpladePooling';
}

export const spladeSpec: FamilySpec = {
  capabilities: { encode: ['sparse'], defaultOutputs: ['sparse'], score: 'embeddings', extract: false },

  match(evidence) {
    if (evidence.modules.some((m) => isSpladePooling(m.type))) return 110;
    const arch = evidence.config?.architectures?.[0] ?? '';
    return MLM_ARCHITECTURE.test(arch) ? 60 : 0;
  },
};
