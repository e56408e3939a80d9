import type { FamilyAdapter } from './family.js';
import type { Family } from './registry.js';

/**
 * Each family's adapter, imported on demand. A model thread runs one model, so it imports one
 * family instead of all of them: the image families pull in sharp, and every import is paid again
 * by each new thread (a pool that evicts and loads all the time starts many). The keys are
 * registry.ts's families, all of them (`satisfies Record<Family, …>` fails to compile otherwise).
 */
const LOADERS = {
  dense: async () => (await import('./dense/dense.js')).dense,
  'cross-encoder': async () => (await import('./cross-encoder/cross-encoder.js')).crossEncoder,
  'causal-reranker': async () => (await import('./causal-reranker/causal-reranker.js')).causalReranker,
  splade: async () => (await import('./splade/splade.js')).splade,
  colbert: async () => (await import('./colbert/colbert.js')).colbert,
  gliner: async () => (await import('./gliner/gliner.js')).gliner,
  'token-classification': async () => (await import('./token-classification/token-classification.js')).tokenClassification,
  ocr: async () => (await import('./ocr/ocr.js')).ocr,
  clip: async () => (await import('./clip/clip.js')).clip,
  'image-classification': async () => (await import('./image-classification/image-classification.js')).imageClassification,
} satisfies Record<Family, () => Promise<{ readonly name: string }>>;

type Loaded<K extends Family> = Awaited<ReturnType<(typeof LOADERS)[K]>>;

/**
 * Compile-time check of the table: each loader returns a FamilyAdapter whose `name` is its
 * own key. A wrong entry (a loader returning another family's adapter, or an adapter whose name
 * is misspelled) makes `Misnamed` non-never and this line fail to compile, naming the key.
 */
type Misnamed = { [K in Family]: Loaded<K> extends FamilyAdapter<K> ? never : K }[Family];
const loadersAreConsistent: [Misnamed] extends [never] ? true : Misnamed = true;
void loadersAreConsistent;

export function loadFamily(name: Family): Promise<FamilyAdapter> {
  return LOADERS[name]();
}
