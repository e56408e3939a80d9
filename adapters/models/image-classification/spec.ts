import type { Evidence, FamilySpec } from '../family-spec.js';
import { isLabelFileName } from './image-labels.js';

/** Image classification: a *ForImageClassification config, or the ONNX model zoo's lone-graph layout. */

/** The folder's only graph, or null when it has several. */
export function singleGraph(evidence: Evidence): string | null {
  const graphs = Object.values(evidence.onnx);
  return graphs.length === 1 ? (graphs[0] ?? null) : null;
}

export const imageClassificationSpec: FamilySpec = {
  capabilities: { inputs: ['image'], encode: ['dense'], defaultOutputs: ['dense'], score: null, extract: true },

  match(evidence) {
    const arch = evidence.config?.architectures?.[0] ?? '';
    if (arch.endsWith('ForImageClassification')) return 90;
    // The ONNX model zoo layout: one graph, no tokenizer, often no config.json at all. The graph's
    // 4-D image input is checked by detectOptions (match never reads graphs).
    if (singleGraph(evidence) === null || evidence.folder.has('tokenizer.json')) return 0;
    const hasLabels = evidence.config?.id2label !== undefined || evidence.folder.files.some(isLabelFileName);
    if (hasLabels || evidence.folder.has('preprocessor_config.json')) return 50;
    return evidence.config === undefined ? 20 : 0;
  },
};
