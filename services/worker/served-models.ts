import { builtinModelIds } from '../../adapters/sources/builtin-models.js';
import { missingModelDirs, modelsInDir } from '../../adapters/sources/model-dirs.js';
import type { Route } from '../../adapters/nats/rpc/rpc-server.js';
import { getFamily } from '../../adapters/models/registry.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { Primitive } from '../../adapters/protocol/subjects.js';
import type { Catalog } from '../../pipelines/inference/catalog.js';
import type { InferenceEngine } from '../../pipelines/inference/engine.js';

/**
 * Which models a worker serves and, per model, which primitives: the configured list, else
 * every catalog entry, else every model folder under the model dirs (`org/name/` or `name/`),
 * plus the built-in models when asked (`shoal dev`).
 * Primitives come from the model's family (an embedder encodes and scores, a reranker scores,
 * NER extracts), so no consumer is created for work the model cannot do.
 */

/** The models to serve, and whether they were found in the models directories rather than named. */
export interface ServedSelection {
  models: string[];
  /** Found by looking (model dirs + built-ins): a model among them that cannot load is skipped, not fatal. */
  discovered: boolean;
}

export async function servedModels(configured: readonly string[], catalog: Catalog | null, modelDirs: readonly string[], builtins = false): Promise<ServedSelection> {
  if (configured.length > 0) return { models: [...new Set(configured)], discovered: false };
  if (catalog !== null && catalog.entries.size > 0) return { models: [...catalog.entries.keys()].sort(), discovered: false };
  const found = new Set<string>();
  for (const dir of modelDirs) for (const model of await modelsInDir(dir)) found.add(model);
  if (found.size === 0) {
    const missing = await missingModelDirs(modelDirs);
    throw new ShoalError(
      ErrorCode.CONFIG_INVALID,
      'the worker serves no models: name them (--models / SHOAL_MODELS), give a catalog (--catalog), or a models directory with models in it (SHOAL_MODEL_DIR)' +
        (missing.length > 0 ? `; models directory ${missing.join(', ')} does not exist` : ''),
    );
  }
  // The models shipped inside npm packages (PaddleOCR) need no folder: `shoal dev` serves them beside the found ones.
  const extra = builtins ? builtinModelIds().filter((id) => !found.has(id)) : [];
  return { models: [...[...found].sort(), ...extra], discovered: true };
}

/**
 * The primitives each model supports, from its detected family (no ONNX session is loaded). With
 * `skip`, a model whose files cannot be read is reported to it and left out (one broken folder
 * under the models directory must not stop the others being served); without, it fails the start.
 */
export async function routesFor(engine: InferenceEngine, models: readonly string[], skip?: (model: string, error: unknown) => void): Promise<Route[]> {
  const routes: Route[] = [];
  for (const model of models) {
    let profile;
    try {
      profile = await engine.profile(model);
    } catch (error) {
      if (skip === undefined) throw error;
      skip(model, error);
      continue;
    }
    const capabilities = getFamily(profile.family).capabilities;
    const primitives: Primitive[] = [];
    if (capabilities.encode.length > 0) primitives.push('encode');
    if (capabilities.score !== null) primitives.push('score');
    if (capabilities.extract) primitives.push('extract');
    for (const primitive of primitives) routes.push({ primitive, model });
  }
  return routes;
}
