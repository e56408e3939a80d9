import type { FamilySpec } from '../family-spec.js';
import type { StModule } from '../model-files.js';

/** Dense sentence embeddings: a sentence-transformers Pooling module, else a bare encoder/embedding architecture. */

export function isPoolingModule(module: StModule): boolean {
  return module.type.endsWith('.Pooling') || module.type === 'Pooling';
}

export const denseSpec: FamilySpec = {
  capabilities: { encode: ['dense'], defaultOutputs: ['dense'], score: 'embeddings', extract: false },

  match(evidence) {
    if (evidence.modules.some(isPoolingModule)) return 100;
    const arch = evidence.config?.architectures?.[0] ?? '';
    if (/(Model|EmbeddingModel)$/.test(arch) && !arch.startsWith('CLIP')) return 40;
    return 0;
  },
};
