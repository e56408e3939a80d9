import type { Role } from '../../adapters/protocol/requests.js';
import type { SharedCategories } from './category-index.js';

/**
 * What a classifier does, every step configurable; `resolveClassifierOptions` fills the
 * documented defaults and freezes the result (the input is never changed).
 */

export interface ClassifierOptionsInput {
  /** Dense embedding model for products and categories. */
  model: string;
  /** Categories returned per product: the best plus topK − 1 alternatives. @default 5 */
  topK?: number | undefined;
  /** Candidates retrieved for rerank, image fusion and the hierarchy vote. @default max(topK, rerankTop when reranking, 20 with hierarchy or images) */
  candidates?: number | undefined;
  /** Cross-encoder that rescores the best candidates (decided_by "rerank"). @default none */
  rerankModel?: string | undefined;
  /** Candidates the cross-encoder rescores. @default 20 */
  rerankTop?: number | undefined;
  /** Vote each level top-down among the candidates so a child is only chosen under its parent's best branch. @default false */
  hierarchy?: boolean | undefined;
  /** Scores below this mark the product needs_review. @default 0.5 */
  threshold?: number | undefined;
  /** Category text template (`{path}`, `{name}`, `{id}`). @default '{path}' */
  categoryTemplate?: string | undefined;
  /** Role of product texts (the model's query prompt). @default 'query' */
  productRole?: Role | undefined;
  /** Role of category texts. @default 'document' */
  categoryRole?: Role | undefined;
  /** CLIP-style model: image–category similarity fused into the candidates' scores. @default none */
  imageModel?: string | undefined;
  /** Weight of the image similarity: (1 − w)·text + w·image. @default 0.3 */
  imageWeight?: number | undefined;
  maxLength?: number | undefined;
  /** Folder of the category cache (`classify/` beneath it); null: memory only. @default null */
  cacheDir?: string | null | undefined;
  /** A store of category matrices shared with other processes (the classify workers' object store), after the folder. @default none */
  sharedCategories?: SharedCategories | null | undefined;
}

export interface ClassifierOptions {
  readonly model: string;
  readonly topK: number;
  readonly candidates: number;
  readonly rerankModel: string | null;
  readonly rerankTop: number;
  readonly hierarchy: boolean;
  readonly threshold: number;
  readonly categoryTemplate: string;
  readonly productRole: Role;
  readonly categoryRole: Role;
  readonly imageModel: string | null;
  readonly imageWeight: number;
  readonly maxLength: number | undefined;
  readonly cacheDir: string | null;
  readonly sharedCategories: SharedCategories | null;
}

export const DEFAULT_TOP_K = 5;
export const DEFAULT_RERANK_TOP = 20;
export const DEFAULT_VOTE_CANDIDATES = 20;
export const DEFAULT_THRESHOLD = 0.5;
export const DEFAULT_IMAGE_WEIGHT = 0.3;

export function resolveClassifierOptions(input: ClassifierOptionsInput): ClassifierOptions {
  const topK = input.topK ?? DEFAULT_TOP_K;
  const rerankModel = input.rerankModel ?? null;
  const rerankTop = input.rerankTop ?? DEFAULT_RERANK_TOP;
  const imageModel = input.imageModel ?? null;
  const pool = Math.max(topK, rerankModel === null ? 0 : rerankTop, input.hierarchy === true || imageModel !== null ? DEFAULT_VOTE_CANDIDATES : 0);
  return Object.freeze({
    model: input.model,
    topK,
    candidates: Math.max(input.candidates ?? pool, topK),
    rerankModel,
    rerankTop,
    hierarchy: input.hierarchy ?? false,
    threshold: input.threshold ?? DEFAULT_THRESHOLD,
    categoryTemplate: input.categoryTemplate ?? '{path}',
    productRole: input.productRole ?? 'query',
    categoryRole: input.categoryRole ?? 'document',
    imageModel,
    imageWeight: input.imageWeight ?? DEFAULT_IMAGE_WEIGHT,
    maxLength: input.maxLength,
    cacheDir: input.cacheDir ?? null,
    sharedCategories: input.sharedCategories ?? null,
  });
}
