import type { CallOptions, Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { SearchHit, Sink } from '../../adapters/sinks/sink.js';
import { encodeDense } from './stages/encode.js';

/**
 * A query against an index built by ingest, the one implementation behind `shoal search` and
 * `POST /v1/search`: the query is encoded (role `query`, interactive lane: it goes into the very
 * next batch) with the model the index records, the k nearest chunks are read (with an already
 * validated filter), optionally rescored by a cross-encoder, and each hit is shaped as one line.
 */

export interface SearchQuery {
  query: string;
  k: number;
  /** A where-clause already checked by validateFilter. */
  filter?: string | undefined;
  /** Query encoder; default: the model the index was built with. */
  model?: string | undefined;
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
}

/** Candidates handed to the reranker per hit asked for (it can only reorder what it is given). */
const RERANK_CANDIDATES_PER_HIT = 4;
const MIN_RERANK_CANDIDATES = 50;

export async function searchIndex(engine: Engine, sink: Sink, query: SearchQuery, call: CallOptions = {}): Promise<SearchHit[]> {
  if (query.query.trim() === '') throw new ShoalError(ErrorCode.INVALID_INPUT, 'the query is empty');
  const spec = await sink.describe();
  if (spec === null) throw new ShoalError(ErrorCode.NOT_FOUND, `no index table in ${query.where}: run shoal ingest first`);
  const model = query.model ?? spec.metadata.model;
  if (model === undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, 'the index does not record its model: give --model');
  const [vector] = await encodeDense(engine, [query.query], { model, role: 'query', priority: 'interactive' }, call);
  if (vector === undefined) return [];
  if (vector.length !== spec.dimension) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `model ${model} gives ${vector.length}-dimensional vectors, the index holds ${spec.dimension}`);
  }
  const k = query.rerank === undefined ? query.k : Math.max(query.k * RERANK_CANDIDATES_PER_HIT, MIN_RERANK_CANDIDATES);
  const candidates = await sink.search(Array.from(vector), { k, filter: query.filter });
  if (query.rerank === undefined || candidates.length === 0) return candidates;
  // The candidates (at least MIN_RERANK_CANDIDATES pairs) are a batch, not a query: bulk lane.
  const scored = await engine.score({ model: query.rerank, query: query.query, items: candidates.map((hit) => ({ text: hit.row.text })), priority: 'bulk' }, call);
  return scored.scores.slice(0, query.k).flatMap((entry) => {
    const hit = candidates[entry.index];
    return hit === undefined ? [] : [{ row: hit.row, score: entry.score }];
  });
}

/** One hit as printed (scores rounded to 6 decimals). */
export function hitLine(rank: number, hit: SearchHit): HitLine {
  const { row } = hit;
  return { rank, score: Math.round(hit.score * 1e6) / 1e6, id: row.id, document_id: row.document_id, source: row.source, page: row.page, text: row.text };
}
