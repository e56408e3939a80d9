import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { DeleteDocumentQuery, DocumentsQuery, type IndexList } from '../../../adapters/protocol/index-admin.js';
import type { ShoalError } from '../../../adapters/protocol/errors.js';
import { parseWith } from '../../../adapters/protocol/validate.js';
import type { SinkWriteObserver } from '../../../adapters/sinks/delivery.js';
import { openSink, type OpenedSink } from '../../../adapters/sinks/open.js';
import { deleteDocument, indexStats, listDocuments, listTables } from '../../../pipelines/documents/index-admin.js';
import type { RouteContext } from '../context.js';
import { SEARCH_STORE_RETRY_MS } from '../index-outages.js';
import { INDEX_NAME, indexTarget } from '../index-sinks.js';
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
  /** Opens the configured index `name`, runs `body` within the request's life, closes it. */
  const onIndex = async <T>(request: FastifyRequest, reply: FastifyReply, body: (opened: OpenedSink, name: string) => Promise<T>): Promise<T> => {
    context.metrics.track(request, { primitive: 'index', model: OTHER_MODEL });
    const { name } = parseWith(IndexParams, request.params, 'index path');
    const target = indexTarget(context.settings.indexes, name);
    // A label only once it names a configured index (as /v1/search): a caller's made-up names never become series.
    context.metrics.track(request, { primitive: 'index', model: name });
    context.indexOutages.check(name);
    const observer: SinkWriteObserver = {
      write: () => undefined,
      retrying: (_backend, failure: ShoalError) => context.indexOutages.failed(name, failure),
      succeeded: () => context.indexOutages.answered(name),
    };
    return context.call(reply)(async (signal) => {
      const opened = openSink(target, { ...context.settings.indexOptions, observer, retry: { maxElapsedMs: SEARCH_STORE_RETRY_MS, signal } });
      try {
        return await body(opened, name);
      } finally {
        await opened.sink.close();
      }
    });
  };

  app.get('/v1/indexes', async (request): Promise<IndexList> => {
    context.metrics.track(request, { primitive: 'index', model: OTHER_MODEL });
    const configured = context.settings.indexes ?? {};
    const indexes: IndexList['indexes'] = [];
    for (const name of Object.keys(configured).sort()) {
      // Opening connects to nothing (the stores are reached on first use): the backend and table come from the target.
      const opened = openSink(configured[name] ?? '', context.settings.indexOptions ?? {});
      await opened.sink.close();
      indexes.push({ name, backend: opened.backend, table: opened.table });
    }
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
