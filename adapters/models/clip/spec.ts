import type { FamilySpec } from '../family-spec.js';

/** CLIP: config.json says clip, or a config-less export with a text and a vision graph and a tokenizer. */

/** Component names of the two graphs in the exports seen in the wild, preferred first. */
export const TEXT_COMPONENTS = ['text_model', 'textual', 'text_encoder'];
export const VISION_COMPONENTS = ['vision_model', 'visual', 'image_encoder', 'vision_encoder'];

export function component(onnx: Record<string, string>, names: readonly string[]): string | undefined {
  return names.find((name) => onnx[name] !== undefined);
}

export const clipSpec: FamilySpec = {
  capabilities: { inputs: ['text', 'image'], encode: ['dense'], defaultOutputs: ['dense'], score: 'embeddings', extract: false },

  match(evidence) {
    const arch = evidence.config?.architectures?.[0] ?? '';
    if (evidence.config?.model_type === 'clip' || arch === 'CLIPModel') return 100;
    // A config-less export with the two graphs and a tokenizer.
    const bothGraphs = component(evidence.onnx, TEXT_COMPONENTS) !== undefined && component(evidence.onnx, VISION_COMPONENTS) !== undefined;
    return bothGraphs && evidence.folder.has('tokenizer.json') ? 60 : 0;
  },
};
