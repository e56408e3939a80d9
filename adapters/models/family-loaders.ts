import type { FamilyAdapter } from './family.js';
import type { Family } from './profile.js';

/**
 * Each family's adapter, imported on demand. A model thread runs one model, so it imports one
 * family instead of all of them: the image families pull in sharp, and every import is paid again
 * by each new thread (a pool that evicts and loads all the time starts many).
 */
const LOADERS: Record<Family, () => Promise<FamilyAdapter>> = {
  dense: async () => (await import('./dense.js')).dense,
  'cross-encoder': async () => (await import('./cross-encoder.js')).crossEncoder,
  splade: async () => (await import('./splade.js')).splade,
  colbert: async () => (await import('./colbert.js')).colbert,
  'token-classification': async () => (await import('./token-classification.js')).tokenClassification,
  gliner: async () => (await import('./gliner.js')).gliner,
  ocr: async () => (await import('./ocr.js')).ocr,
  clip: async () => (await import('./clip.js')).clip,
  'image-classification': async () => (await import('./image-classification.js')).imageClassification,
};

export function loadFamily(name: Family): Promise<FamilyAdapter> {
  return LOADERS[name]();
}
