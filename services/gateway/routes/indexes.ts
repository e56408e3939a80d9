import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { DeleteDocumentQuery, DocumentsQuery, type IndexList } from '../../../adapters/protocol/index-admin.js';
import type { ShoalError } from '../../../adapters/protocol/errors.js';
import { parseWith } from '../../../adapters/protocol/validate.js';
import type { StoreWriteObserver } from '../../../adapters/stores/shared/delivery.js';
import type { OpenedStore } from '../../../adapters/stores/open.js';
import type { StoreName } from '../../../adapters/stores/registry.js';
import { deleteDocument, indexStats, listDocuments, listTables } from '../../../pipelines/documents/index-admin.js';
import type { RouteContext } from '../context.js';
import { SEARCH_STORE_RETRY_MS } from '../index-outages.js';
import { INDEX_NAME } from '../index-stores.js';
import { OTHER_MODEL } from '../request-metrics.js';

/**
 * Index management over HTTP, the answers of `shoal index ... --json` (one implementation:
 * pipelines/documents/index-admin.ts): GET /v1/indexes (the configured names, with their backend
 * and table; never their paths or URIs), and per configured index `stats`, `documents` (paged:
 * `?limit=&offset=&source_prefix=`), `DELETE documents?source=` (the source %-encoded, as any
 * query value) and `tables`. An index is named as /v1/search names it (SHOAL_INDEXES), never by
 * a path; its table is the configured one. Store calls retry briefly and mark a failing store
 * down, as searches do (index-outages.ts).
 */

export const IndexParams = z.strictObject({ name: z.string().regex(INDEX_NAME, 'an index name: letters, digits, _ or -, up to 64') });

export function registerIndexRoutes(app: FastifyInstance, context: RouteContext): void {
  /** Borrows the kept store of the configured index `name` (index-pool.ts) and runs `body` within the request's life. */
  const onIndex = async <T>(request: FastifyRequest, reply: FastifyReply, body: (opened: OpenedStore, name: string) => Promise<T>): Promise<T> => {
    context.metrics.track(request, { primitive: 'index', model: OTHER_MODEL });
    const { name } = parseWith(IndexParams, request.params, 'index path');
    context.indexPool.ref(name);
    // A label only once it names a configured index (as /v1/search): a caller's made-up names never become series.
    context.metrics.track(request, { primitive: 'index', model: name });
    context.indexOutages.check(name);
    const observer: StoreWriteObserver = {
      write: () => undefined,
      retrying: (_backend, failure: ShoalError) => context.indexOutages.failed(name, failure),
      succeeded: () => context.indexOutages.answered(name),
    };
    return context.call(reply)(async (signal) => {
      const opened = context.indexPool.borrow(name, { observer, retry: { maxElapsedMs: SEARCH_STORE_RETRY_MS, signal } });
      try {
        return await body(opened, name);
      } catch (error) {
        context.indexPool.failed(name, error);
        throw error;
      }
    });
  };

  app.get('/v1/indexes', async (request): Promise<IndexList> => {
    context.metrics.track(request, { primitive: 'index', model: OTHER_MODEL });
    // The backend and table come from each IndexRef, parsed at start: no store is reached.
    const indexes: IndexList['indexes'] = context.indexPool.names().sort().map((name) => {
      const ref = context.indexPool.ref(name);
      return { name, backend: ref.backend as StoreName, table: ref.table };
    });
    return { indexes };
  });

  app.get('/v1/indexes/:name/stats', async (request, reply) => onIndex(request, reply, (opened, name) => indexStats(opened, name)));

  app.get('/v1/indexes/:name/tables', async (request, reply) => onIndex(request, reply, (opened, name) => listTables(opened, name)));

  app.get('/v1/indexes/:name/documents', async (request, reply) => {
    const query = parseWith(DocumentsQuery, request.query ?? {}, 'documents query string');
    return onIndex(request, reply, (opened, name) => listDocuments(opened, name, { limit: query.limit, offset: query.offset, sourcePrefix: query.source_prefix }));
  });

  app.delete('/v1/indexes/:name/documents', async (request, reply) => {
    const { source } = parseWith(DeleteDocumentQuery, request.query ?? {}, 'delete query string (?source=, %-encoded)');
    return onIndex(request, reply, (opened, name) => deleteDocument(opened, name, source));
  });
}
