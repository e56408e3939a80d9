/**
 * `import { InferenceEngine } from 'shoal'`: the package's main entry for programs that embed
 * the engine. Everything here is re-exported from where it lives; the protocol types are also
 * at `shoal/protocol` and the NATS clients at `shoal/clients` (package.json `exports`).
 */

export { InferenceEngine, EngineOptions } from '../../pipelines/inference/engine.js';
export type { EngineOptionsInput, InspectResult } from '../../pipelines/inference/engine.js';
export type { Catalog, CatalogEntry } from '../../pipelines/inference/catalog.js';
export { loadCatalog } from '../../pipelines/inference/catalog.js';
/** Engine options from SHOAL_* / HF_* variables, as the CLI reads them: `new InferenceEngine(engineOptionsFromEnv(process.env))`. */
export { engineOptionsFromEnv } from '../settings/engine-settings.js';
export { ErrorCode, ShoalError, isShoalError, hasErrorCode } from '../../adapters/protocol/errors.js';
export type { Engine, CallOptions } from '../../adapters/protocol/engine.js';
export type { EncodeRequest, ScoreRequest, ExtractRequest, TokenizeRequest } from '../../adapters/protocol/requests.js';
export type { EncodeResult, ScoreResult, ExtractResult, TokenizeResult, EncodedItem, ScoredItem, ExtractedItem, Entity } from '../../adapters/protocol/results.js';
/** Catalog taxonomy classification over any Engine (docs/classify.md). */
export { classify, TaxonomyClassifier, Evaluator } from '../../pipelines/classify/index.js';
export type { ClassifyCallOptions, ClassifierOptionsInput, Evaluation } from '../../pipelines/classify/index.js';
export { loadTaxonomyFile, parseTaxonomy, labelsTaxonomy } from '../../adapters/taxonomy/index.js';
export type { Taxonomy, Category } from '../../adapters/taxonomy/index.js';
export type { ClassifyRequest, ClassifyResult, Classification } from '../../adapters/protocol/classify.js';
/** Document ingest and search, as `shoal ingest` / `shoal search` run them (docs/ingest.md "Library use"). */
export { ingest, search, searchByDocument, openIndex } from './documents.js';
export type { IngestOptions, IngestRecord, IngestResult, SearchOptions, SearchHit, SearchDocument, OpenIndexOptions, OpenedStore } from './documents.js';
export type { IngestProgress, IngestSummary, FailedDocument } from '../../pipelines/documents/runner.js';
export type { SearchMode } from '../../pipelines/documents/search.js';
/** The summary of what finished, from the CANCELLED error of an ingest stopped by its signal (else null). */
export { interruptedSummary } from '../../pipelines/documents/interrupted.js';
