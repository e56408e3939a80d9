/** Taxonomy classification over the Engine interface: the API, the classifier, evaluation. */
export { classify, requestClassifierOptions, requestTaxonomy, type ClassifyCallOptions } from './classify.js';
export { matrixOptions, TaxonomyClassifier, type CategoryStats } from './classifier.js';
export { categoryIndex, categoryKey, categoryText, type CategoryCache, type CategoryEmbedding, type CategoryIndex, type CategoryProgress, type CategorySource, type SharedCategories } from './category-index.js';
export { Evaluator, type Evaluation, type EvaluationGroup, type HierarchicalScores } from './evaluate.js';
export { goldPath } from './gold.js';
export { hierarchyChoice } from './hierarchy.js';
export { packRows, topK, type PackedMatrix, type TopK } from './matrix.js';
export { resolveClassifierOptions, DEFAULT_THRESHOLD, DEFAULT_TOP_K, type ClassifierOptions, type ClassifierOptionsInput } from './options.js';
