import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { serveThread, type HandlerResult } from '../../adapters/support/thread-rpc.js';
import { topK, type PackedMatrix } from './matrix.js';
import type { SearchRequest, SearchResponse } from './search-messages.js';

/**
 * The search thread: holds category matrices (shared memory) by key and answers top-k queries,
 * so a scan of thousands of categories never blocks the thread that serves HTTP or writes output.
 */

const matrices = new Map<string, PackedMatrix>();

serveThread<SearchRequest, SearchResponse>((request): HandlerResult<SearchResponse> => {
  switch (request.kind) {
    case 'load':
      matrices.set(request.key, { rows: request.rows, dim: request.dim, data: new Float32Array(request.buffer, 0, request.rows * request.dim) });
      return { body: { kind: 'loaded' } };
    case 'drop':
      matrices.delete(request.key);
      return { body: { kind: 'dropped' } };
    case 'search': {
      const matrix = matrices.get(request.key);
      if (matrix === undefined) throw new ShoalError(ErrorCode.INTERNAL, `search thread has no category matrix ${request.key}`);
      const found = topK(matrix, request.queries, request.count, request.k);
      return { body: { kind: 'found', ...found }, transfer: [found.indices.buffer, found.scores.buffer] };
    }
  }
});
