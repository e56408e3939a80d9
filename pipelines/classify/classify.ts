import { ClassifyRequest, type ClassifyMethod, type ClassifyResult } from '../../adapters/protocol/classify.js';
import type { CallOptions, Engine } from '../../adapters/protocol/engine.js';
import { parseWith } from '../../adapters/protocol/validate.js';
import { labelsTaxonomy, parseTaxonomy, type Taxonomy } from '../../adapters/taxonomy/index.js';
import { TaxonomyClassifier } from './classifier.js';
import type { ClassifierOptionsInput } from './options.js';

/**
 * The engine-facing API: `classify(engine, {model, items, taxonomy | labels, top_k, rerank})`
 * over any Engine (in process or NATS). One call opens a classifier (category matrix from the
 * cache when `cacheDir` holds it), classifies the items and stops its search thread; programs
 * classifying many batches keep a TaxonomyClassifier open instead.
 */

export interface ClassifyCallOptions extends CallOptions {
  /** Category cache folder (`classify/` beneath it). @default none: embedded for this call only */
  cacheDir?: string | null;
}

export function requestTaxonomy(request: { taxonomy?: string | undefined; labels?: readonly string[] | undefined; max_depth?: number | undefined }): Taxonomy {
  if (request.labels !== undefined) return labelsTaxonomy(request.labels);
  return parseTaxonomy(request.taxonomy ?? '', { maxDepth: request.max_depth, name: 'taxonomy' });
}

/** A request's method settings (model, candidates, rerank, hierarchy…) as classifier options: one mapping for the API and the gateway. */
export function requestClassifierOptions(request: ClassifyMethod, cacheDir: string | null = null): ClassifierOptionsInput {
  const rerank = typeof request.rerank === 'string' ? { model: request.rerank } : request.rerank;
  return {
    model: request.model,
    topK: request.top_k,
    candidates: request.candidates,
    rerankModel: rerank?.model,
    rerankTop: rerank?.top,
    hierarchy: request.hierarchy,
    threshold: request.threshold,
    imageModel: request.image_model,
    imageWeight: request.image_weight,
    categoryTemplate: request.category_template,
    maxLength: request.max_length,
    cacheDir,
  };
}

export async function classify(engine: Engine, input: ClassifyRequest, options: ClassifyCallOptions = {}): Promise<ClassifyResult> {
  const request = parseWith(ClassifyRequest, input, 'classify request');
  const taxonomy = requestTaxonomy(request);
  const call = options.signal === undefined ? {} : { signal: options.signal };
  const classifier = await TaxonomyClassifier.open(engine, taxonomy, requestClassifierOptions(request, options.cacheDir ?? null), call);
  try {
    const items = await classifier.classify(request.items, call);
    return { model: request.model, categories: taxonomy.categories.length, items };
  } finally {
    await classifier.close();
  }
}
