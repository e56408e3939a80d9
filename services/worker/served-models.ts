import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Route } from '../../adapters/nats/rpc-server.js';
import { getFamily } from '../../adapters/models/registry.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { Primitive } from '../../adapters/protocol/subjects.js';
import type { Catalog } from '../../pipelines/inference/catalog.js';
import type { InferenceEngine } from '../../pipelines/inference/engine.js';

/**
 * Which models a worker serves and, per model, which primitives: the configured list, else
 * every catalog entry, else every model folder under the model dirs (`org/name/` or `name/`).
 * Primitives come from the model's family (an embedder encodes and scores, a reranker scores,
 * NER extracts), so no consumer is created for work the model cannot do.
 */

const MODEL_FILES = ['config.json', 'modules.json', 'onnx', 'model.onnx'];

async function isDir(path: string): Promise<boolean> {
  return stat(path).then((s) => s.isDirectory(), () => false);
}

async function looksLikeModel(dir: string): Promise<boolean> {
  const entries = await readdir(dir).catch((): string[] => []);
  return entries.some((name) => MODEL_FILES.includes(name) || name.endsWith('.onnx'));
}

/** Model folders under a models dir, as the ids the sources resolve them by (`org/name` or `name`). */
export async function modelsInDir(root: string): Promise<string[]> {
  const found: string[] = [];
  const top = await readdir(root, { withFileTypes: true }).catch(() => []);
  for (const entry of top) {
    if (entry.name.startsWith('.')) continue;
    const dir = join(root, entry.name);
    if (!(await isDir(dir))) continue;
    if (await looksLikeModel(dir)) {
      found.push(entry.name);
      continue;
    }
    for (const inner of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
      if (!inner.name.startsWith('.') && (await isDir(join(dir, inner.name))) && (await looksLikeModel(join(dir, inner.name)))) {
        found.push(`${entry.name}/${inner.name}`);
      }
    }
  }
  return found.sort();
}

export async function servedModels(configured: readonly string[], catalog: Catalog | null, modelDirs: readonly string[]): Promise<string[]> {
  if (configured.length > 0) return [...new Set(configured)];
  if (catalog !== null && catalog.entries.size > 0) return [...catalog.entries.keys()].sort();
  const found = new Set<string>();
  for (const dir of modelDirs) for (const model of await modelsInDir(dir)) found.add(model);
  if (found.size === 0) {
    throw new ShoalError(
      ErrorCode.CONFIG_INVALID,
      'the worker serves no models: name them (--models / SHOAL_MODELS), give a catalog (--catalog), or a models directory with models in it (SHOAL_MODEL_DIR)',
    );
  }
  return [...found].sort();
}

/** The primitives each model supports, from its detected family (no ONNX session is loaded). */
export async function routesFor(engine: InferenceEngine, models: readonly string[]): Promise<Route[]> {
  const routes: Route[] = [];
  for (const model of models) {
    const profile = await engine.profile(model);
    const capabilities = getFamily(profile.family).capabilities;
    const primitives: Primitive[] = [];
    if (capabilities.encode.length > 0) primitives.push('encode');
    if (capabilities.score !== null) primitives.push('score');
    if (capabilities.extract) primitives.push('extract');
    for (const primitive of primitives) routes.push({ primitive, model });
  }
  return routes;
}
