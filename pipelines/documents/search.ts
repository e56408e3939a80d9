import type { CallOptions, Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, isShoalError, ShoalError } from '../../adapters/protocol/errors.js';
import type { EmbeddingDtype } from '../../adapters/protocol/output-types.js';
import type { DocumentMetadata } from '../../adapters/protocol/metadata.js';
import type { SearchHit, Store, TableSpec } from '../../adapters/stores/store.js';
import { MAX_TEXT_QUERY_CHARS, searchTextOf, TEXT_SEARCH_BACKENDS } from '../../adapters/stores/shared/text-search.js';
import { fusionDepth, reciprocalRankFusion } from './fusion.js';
import { encodeDense } from './stages/encode.js';
import { encodeMultivector, MULTIVECTOR_MODEL_KEY } from './stages/encode-multivector.js';
import { encodeSparse, SPARSE_MODEL_KEY } from './stages/encode-sparse.js';

/**
 * What a search ranks by: the dense vectors, the sparse ones, the chunk text (full-text search,
 * BM25 in LanceDB, ts_rank in PostgreSQL; adapters/stores/shared/text-search.ts), or every one of
 * those the index has, fused by reciprocal rank fusion (fusion.ts).
 */
export const SEARCH_MODES = ['dense', 'sparse', 'text', 'hybrid'] as const;
export type SearchMode = (typeof SEARCH_MODES)[number];

/** How hits may be grouped: per source document (search-groups.ts). */
export const GROUP_BY = ['document'] as const;
export type GroupBy = (typeof GROUP_BY)[number];

/**
 * A query against an index built by ingest, the one implementation behind `shoal search` and
 * `POST /v1/search`: the query is encoded (role `query`, interactive lane: it goes into the very
 * next batch) with the model the index records, the k nearest chunks are read (with an already
 * validated filter), optionally rescored by a cross-encoder, and each hit is shaped as one line.
 * `text` mode ranks by the chunk text in the store (no encoder). `hybrid` fuses every ranking the
 * index has, dense, sparse (a pipeline with encode.sparse) and full-text (a store that has it),
 * the top fusionDepth(n) of each by reciprocal rank fusion; it is the default of an index with
 * sparse vectors. An index with multi-vectors (ColBERT) has its candidates rescored by late
 * interaction (MaxSim). Grouping per document is search-groups.ts's.
 */

export interface SearchQuery {
  query: string;
  k: number;
  /** A where-clause already checked by validateFilter. */
  filter?: string | undefined;
  /** Query encoder; default: the model the index was built with. */
  model?: string | undefined;
  /**
   * dense, sparse, text, or hybrid (every ranking the index has, dense, sparse and full-text,
   * fused by reciprocal rank fusion, fusion.ts).
   * @default hybrid when the index holds sparse vectors, else dense
   */
  mode?: SearchMode | undefined;
  /** Cross-encoder that rescores the candidates. */
  rerank?: string | undefined;
  /** Where the index is, for messages. */
  where: string;
}

/** The fields `shoal search` prints and `POST /v1/search` answers, per hit. */
export interface HitLine {
  rank: number;
  score: number;
  id: string;
  document_id: string;
  source: string;
  page: number;
  text: string;
  /** The heading the chunk sits under (null: none found). */
  heading: string | null;
  /** The chunk's number within its document, from 0. */
  chunk: number;
  /** Where the chunk's text starts and ends in the document's text (characters, end exclusive). */
  start: number;
  end: number;
  /** The document's metadata (title, dates, tags... adapters/protocol/metadata.ts); null when it has none. */
  metadata: DocumentMetadata | null;
}

/** Candidates handed to the reranker per hit asked for (it can only reorder what it is given). */
export const RERANK_CANDIDATES_PER_HIT = 4;
const MIN_RERANK_CANDIDATES = 50;

/** How many candidates a search of `k` hits hands to its reranker (or late interaction): max(4k, 50). */
export function rerankCandidates(k: number): number {
  return Math.max(k * RERANK_CANDIDATES_PER_HIT, MIN_RERANK_CANDIDATES);
}

export async function searchIndex(engine: Engine, sink: Store, query: SearchQuery, call: CallOptions = {}): Promise<SearchHit[]> {
  const spec = await indexSpec(sink, query);
  return rankedChunks(engine, sink, spec, query, query.k, call);
}

/** The index's spec, after the checks every search makes first (an empty query, nothing ingested). */
export async function indexSpec(sink: Store, query: SearchQuery): Promise<TableSpec> {
  if (query.query.trim() === '') throw new ShoalError(ErrorCode.INVALID_INPUT, 'the query is empty');
  const spec = await sink.describe();
  if (spec === null) throw new ShoalError(ErrorCode.NOT_FOUND, `nothing ingested into ${query.where} yet: run shoal ingest (or POST /v1/ingest) first`);
  return spec;
}

/** The best `wanted` chunks for the query, in the query's mode, rescored by late interaction and the reranker when asked. */
export async function rankedChunks(engine: Engine, sink: Store, spec: TableSpec, query: SearchQuery, wanted: number, call: CallOptions): Promise<SearchHit[]> {
  const mode = searchMode(spec, query.mode);
  // Late interaction and the cross-encoder can only reorder what they are given: a wider pool then.
  const multivectorModel = spec.optionalColumns.includes('multivector') ? spec.metadata[MULTIVECTOR_MODEL_KEY] : undefined;
  const rescored = query.rerank !== undefined || multivectorModel !== undefined;
  const pool = rescored ? rerankCandidates(wanted) : wanted;
  let candidates: SearchHit[];
  if (mode === 'dense') candidates = await denseHits(engine, sink, spec, query, pool, call);
  else if (mode === 'sparse') candidates = await sparseHits(engine, sink, spec, query, pool, call);
  else if (mode === 'text') candidates = await searchTextOf(sink, query.query, { k: pool, filter: query.filter });
  else candidates = await hybridHits(engine, sink, spec, query, pool, call);
  if (multivectorModel !== undefined && candidates.length > 0) {
    candidates = await lateInteraction(engine, sink, multivectorModel, query, candidates, call);
    if (query.rerank === undefined) return candidates.slice(0, wanted);
  }
  if (query.rerank === undefined || candidates.length === 0) return candidates;
  // The candidates (at least MIN_RERANK_CANDIDATES pairs) are a batch, not a query: bulk lane.
  const scored = await engine.score({ model: query.rerank, query: query.query, items: candidates.map((hit) => ({ text: hit.row.text })), priority: 'bulk' }, call);
  return scored.scores.slice(0, wanted).flatMap((entry) => {
    const hit = candidates[entry.index];
    return hit === undefined ? [] : [{ row: hit.row, score: entry.score }];
  });
}

/**
 * Every ranking the index has, fused (fusion.ts): the dense one always, the sparse one when the
 * index holds sparse vectors, the full-text one when its store ranks by text (LanceDB, pgvector;
 * the others answer UNSUPPORTED_OPERATION, and the leg is left out). The legs run at once: the
 * query encodings in their model threads, the text search in the store. Fewer than two legs is
 * no hybrid: refused, naming what would give one.
 */
async function hybridHits(engine: Engine, sink: Store, spec: TableSpec, query: SearchQuery, wanted: number, call: CallOptions): Promise<SearchHit[]> {
  const depth = fusionDepth(wanted);
  const filter = query.filter;
  const [dense, sparse, text] = await Promise.all([
    denseHits(engine, sink, spec, query, depth, call),
    hasSparse(spec) ? sparseHits(engine, sink, spec, query, depth, call) : null,
    // A query longer than a text query may be (a pasted page) still searches: its first words rank the text leg.
    searchTextOf(sink, query.query.slice(0, MAX_TEXT_QUERY_CHARS), { k: depth, filter }).catch((error: unknown) => {
      if (isShoalError(error) && error.code === ErrorCode.UNSUPPORTED_OPERATION) return null;
      throw error;
    }),
  ]);
  const lists = [dense, sparse, text].filter((list): list is SearchHit[] => list !== null);
  if (lists.length < 2) {
    throw new ShoalError(
      ErrorCode.INVALID_INPUT,
      `mode hybrid fuses the dense ranking with a sparse or a full-text one, and this index has neither: no sparse vectors (its pipeline had no encode.sparse model) and a store that cannot rank by text (${TEXT_SEARCH_BACKENDS.join(' and ')} can)`,
      { details: { field: 'mode' } },
    );
  }
  return reciprocalRankFusion(lists, wanted);
}

function hasSparse(spec: TableSpec): boolean {
  return spec.optionalColumns.includes('sparse') && spec.metadata[SPARSE_MODEL_KEY] !== undefined;
}

/**
 * The mode asked for, or the default: hybrid when the index holds sparse vectors (its pipeline
 * had an encode.sparse model), else dense. Sparse on an index without sparse vectors is refused
 * here; text and hybrid depend on the store too (hybridHits, text-search.ts).
 */
export function searchMode(spec: TableSpec, asked: SearchMode | undefined): SearchMode {
  const sparse = hasSparse(spec);
  if (asked === undefined) return sparse ? 'hybrid' : 'dense';
  if (asked === 'sparse' && !sparse) throw new ShoalError(ErrorCode.INVALID_INPUT, `mode sparse needs sparse vectors, and this index has none (its pipeline had no encode.sparse model)`, { details: { field: 'mode' } });
  return asked;
}

/**
 * Late-interaction rescoring (ColBERT): the query's token vectors (role `query`) against each
 * candidate's stored ones, MaxSim computed by the store among the candidate ids; the candidates
 * come back in MaxSim order with MaxSim as their score.
 */
async function lateInteraction(engine: Engine, sink: Store, model: string, query: SearchQuery, candidates: readonly SearchHit[], call: CallOptions): Promise<SearchHit[]> {
  const [tokens] = await encodeMultivector(engine, [query.query], { model, role: 'query', priority: 'interactive' }, call);
  if (tokens === undefined) return [...candidates];
  return sink.searchMultivector(tokens, { k: candidates.length, ids: candidates.map((hit) => hit.row.id) });
}

/** The k best rows by sparse dot product with the query's sparse vector (the index's sparse model). */
async function sparseHits(engine: Engine, sink: Store, spec: TableSpec, query: SearchQuery, k: number, call: CallOptions): Promise<SearchHit[]> {
  const model = spec.metadata[SPARSE_MODEL_KEY];
  if (model === undefined) return [];
  const [vector] = await encodeSparse(engine, [query.query], { model, role: 'query', priority: 'interactive' }, call);
  return vector === undefined ? [] : sink.searchSparse(vector, { k, filter: query.filter });
}

/** The k nearest rows by the dense vector (the index's model, or `query.model`). */
async function denseHits(engine: Engine, sink: Store, spec: TableSpec, query: SearchQuery, k: number, call: CallOptions): Promise<SearchHit[]> {
  const model = query.model ?? spec.metadata.model;
  if (model === undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, 'the index does not record its model: give --model');
  // The query takes the output type and Matryoshka cut the index's vectors were stored with.
  const shape = queryShape(spec);
  const [vector] = await encodeDense(engine, [query.query], { model, role: 'query', priority: 'interactive', ...shape }, call);
  if (vector === undefined) return [];
  if (vector.length !== spec.dimension) {
    const what = shape.dtype === undefined ? `${vector.length}-dimensional vectors` : `${vector.length}-value ${shape.dtype} vectors`;
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `model ${model} gives ${what}, the index holds ${spec.dimension}`);
  }
  return sink.search(vector, { k, filter: query.filter });
}

/** The dtype and dimensions an index records (spec.vectorType, metadata.dimensions); nothing for a plain float32 index. */
export function queryShape(spec: TableSpec): { dtype?: EmbeddingDtype; dimensions?: number } {
  const dtype = spec.vectorType ?? 'float32';
  const dimensions = spec.metadata.dimensions === undefined ? undefined : Number(spec.metadata.dimensions);
  if (dimensions !== undefined && !(Number.isInteger(dimensions) && dimensions > 0)) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `the index records dimensions ${JSON.stringify(spec.metadata.dimensions)}, not a positive integer`);
  }
  return { ...(dtype === 'float32' ? {} : { dtype }), ...(dimensions === undefined ? {} : { dimensions }) };
}

/** One hit as printed (scores rounded to 6 decimals). */
export function hitLine(rank: number, hit: SearchHit): HitLine {
  const { row } = hit;
  return {
    rank, score: Math.round(hit.score * 1e6) / 1e6, id: row.id, document_id: row.document_id, source: row.source, page: row.page, text: row.text,
    heading: row.heading, chunk: row.chunk, start: row.start, end: row.end, metadata: row.metadata ?? null,
  };
}
