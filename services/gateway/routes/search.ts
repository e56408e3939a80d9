import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ErrorCode, isShoalError, ShoalError } from '../../../adapters/protocol/errors.js';
import { checkRemoteModelName } from '../../../adapters/protocol/model-names.js';
import { parseWith } from '../../../adapters/protocol/validate.js';
import { validateFilter } from '../../../adapters/stores/shared/filter.js';
import { GROUP_BY, hitLine, RERANK_CANDIDATES_PER_HIT, rerankCandidates, SEARCH_MODES, searchIndex, type SearchQuery } from '../../../pipelines/documents/search.js';
import { GROUP_POOL_PER_DOCUMENT, groupPool, searchDocuments } from '../../../pipelines/documents/search-groups.js';
import type { StoreWriteObserver } from '../../../adapters/stores/shared/delivery.js';
import type { RouteContext } from '../context.js';
import { SEARCH_STORE_RETRY_MS } from '../index-outages.js';
import { INDEX_NAME } from '../index-stores.js';
import { OTHER_MODEL } from '../request-metrics.js';

/**
 * POST /v1/search: `{query, index, k?, filter?, rerank?, mode?, group_by?}` → `{hits: [{rank,
 * score, id, document_id, source, page, text, heading, chunk, start, end}]}`, the lines `shoal
 * search` prints for the same index (one implementation: pipelines/documents/search.ts); with
 * `group_by: "document"`, `{documents: [{rank, score, document_id, source, hits}]}`, k documents. The query is encoded through the interactive
 * lane of the gateway's engine (the workers' request-reply path); `index` names an index the
 * operator configured (SHOAL_INDEXES), never a path; the filter is checked by validateFilter.
 */

const MAX_QUERY_CHARS = 4_096;
const MAX_K = 1_000;

/**
 * Most candidates one search may hand its reranker: one score call of this many pairs (plus the
 * query) holds that many items of the rerank model's admission budget (2,048 by default) while
 * it runs. Without it, `k: 1000` sent 4,001 items in one call, which admission lets through alone
 * (a call alone is always admitted) and which then refused every other call to that model with
 * 429 for the seconds it took. Searches that need more hits rerank on their own (/v1/score).
 */
export const MAX_RERANK_CANDIDATES = 512;
/** The largest `k` a reranked search may ask for: its candidates, max(4k, 50), stay within MAX_RERANK_CANDIDATES. */
export const MAX_RERANK_K = Math.floor(MAX_RERANK_CANDIDATES / RERANK_CANDIDATES_PER_HIT);
/** The largest `k` (documents) a reranked, grouped search may ask for: rerankCandidates(groupPool(k)) ≤ MAX_RERANK_CANDIDATES. */
export const MAX_GROUPED_RERANK_K = Math.floor(MAX_RERANK_CANDIDATES / (RERANK_CANDIDATES_PER_HIT * GROUP_POOL_PER_DOCUMENT));

export const SearchBody = z.strictObject({
  // One message for "" and "   " alike (a .min(1) said it twice for "").
  query: z.string().max(MAX_QUERY_CHARS).refine((query) => query.trim() !== '', 'the query is empty'),
  index: z.string().regex(INDEX_NAME, 'an index name: letters, digits, _ or -, up to 64'),
  k: z.number().int().min(1).max(MAX_K).default(10),
  filter: z.string().min(1).max(4_096).optional(),
  rerank: z.string().min(1).max(1_024).optional(),
  /** dense, sparse, text or hybrid; default hybrid when the index holds sparse vectors (as `shoal search --mode`). */
  mode: z.enum(SEARCH_MODES).optional(),
  /** "document": one entry per document, `k` counting documents (as `shoal search --group-by`). */
  group_by: z.enum(GROUP_BY).optional(),
});

/**
 * A model name the engine refused as a path or URL (checkRemoteModelName): the request's `rerank`
 * when that is the one, else the model the index records, since the request names no other. An
 * index built by `shoal ingest --model ./folder` records the folder, which workers never load
 * by path: say so, instead of a refusal of a field the caller did not send.
 */
function explainModelRefusal(error: unknown, rerank: string | undefined, index: string): unknown {
  if (!isShoalError(error) || error.code !== ErrorCode.INVALID_INPUT || error.details?.field !== 'model') return error;
  const refused = (model: string): boolean => {
    try {
      checkRemoteModelName(model);
      return false;
    } catch {
      return true;
    }
  };
  if (rerank !== undefined && refused(rerank)) return new ShoalError(error.code, `rerank: ${error.message}`, { details: { ...error.details, field: 'rerank' } });
  return new ShoalError(
    ErrorCode.CONFIG_INVALID,
    `index ${index} records the model it was built with as a local folder or URL, which the workers do not load (${error.message}): re-ingest it with a model name the workers serve (a folder under SHOAL_MODEL_DIR is served by its org/name), or search it in process with shoal search`,
    { details: { index } },
  );
}

export function registerSearchRoutes(app: FastifyInstance, context: RouteContext): void {
  app.post('/v1/search', async (request, reply) => {
    // Counted as `search`, not `encode`; the model label is the index, once it names a configured one
    // (a name from the request body that no operator configured never becomes a label).
    context.metrics.track(request, { primitive: 'search', model: OTHER_MODEL, lane: 'interactive' });
    const body = parseWith(SearchBody, request.body, 'search request');
    if (body.rerank !== undefined && rerankCandidates(body.group_by === undefined ? body.k : groupPool(body.k)) > MAX_RERANK_CANDIDATES) {
      const limit = body.group_by === undefined ? MAX_RERANK_K : MAX_GROUPED_RERANK_K;
      throw new ShoalError(
        ErrorCode.INPUT_TOO_LARGE,
        body.group_by === undefined
          ? `k: at most ${MAX_RERANK_K} with rerank (each hit asked for hands ${RERANK_CANDIDATES_PER_HIT} candidates to the reranker, at most ${MAX_RERANK_CANDIDATES} per search); ask for fewer hits, or search without rerank and score the hits with POST /v1/score in batches`
          : `k: at most ${MAX_GROUPED_RERANK_K} documents with rerank and group_by (each document asked for hands the reranker ${RERANK_CANDIDATES_PER_HIT * GROUP_POOL_PER_DOCUMENT} candidates, at most ${MAX_RERANK_CANDIDATES} per search); ask for fewer documents`,
        { details: { field: 'k', limit, maxRerankCandidates: MAX_RERANK_CANDIDATES } },
      );
    }
    // A bad filter is INVALID_INPUT naming the field `filter` (its message reads as the request's field).
    const filter = body.filter === undefined ? undefined : validateFilter(body.filter);
    // The configured index (NOT_FOUND names the configured ones), its store kept open across requests.
    context.indexPool.ref(body.index);
    context.metrics.track(request, { primitive: 'search', model: body.index, lane: 'interactive' });
    // A store known to be down answers 503 at once instead of holding the caller (index-outages.ts).
    context.indexOutages.check(body.index);
    const observer: StoreWriteObserver = {
      write: () => undefined,
      retrying: (_backend, failure) => context.indexOutages.failed(body.index, failure),
      succeeded: () => context.indexOutages.answered(body.index),
    };
    try {
      return await context.call(reply)(async (signal) => {
        // Retried briefly, and never past the request's life: ingest's minute of retries is for writes.
        const { store } = context.indexPool.borrow(body.index, { observer, retry: { maxElapsedMs: SEARCH_STORE_RETRY_MS, signal } });
        const search: SearchQuery = { query: body.query, k: body.k, filter, mode: body.mode, rerank: body.rerank, where: `index ${body.index}` };
        try {
          if (body.group_by === 'document') return { documents: await searchDocuments(context.deps.engine, store, search, { signal }) };
          const hits = await searchIndex(context.deps.engine, store, search, { signal });
          return { hits: hits.map((hit, index) => hitLine(index + 1, hit)) };
        } catch (error) {
          // An outage closes the kept store: the next search opens it again.
          context.indexPool.failed(body.index, error);
          throw error;
        }
      });
    } catch (error) {
      throw explainModelRefusal(error, body.rerank, body.index);
    }
  });
}
