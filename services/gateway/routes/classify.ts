import type { FastifyInstance } from 'fastify';
import { ClassifyRequest, type ParsedClassifyRequest } from '../../../adapters/protocol/classify.js';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { parseWith } from '../../../adapters/protocol/validate.js';
import { requestClassifierOptions, requestTaxonomy, TaxonomyClassifier } from '../../../pipelines/classify/index.js';
import type { RouteContext } from '../context.js';

/**
 * POST /v1/classify: a few products into a taxonomy (inline taxonomy text or labels),
 * synchronously, through the gateway's engine (the workers embed; the gateway searches).
 * Category matrices stay in memory for the taxonomies used last, so a second request with the
 * same taxonomy and model embeds only its products. Catalogs are not classified here: above
 * MAX_SYNC_CLASSIFY_ITEMS the answer is 413 INPUT_TOO_LARGE pointing to `shoal classify --nats`,
 * which fans a catalog out as JetStream jobs (the job API runs primitives; classification of a
 * whole catalog needs the client-side loop that the CLI provides).
 */

/** Products per synchronous request. */
export const MAX_SYNC_CLASSIFY_ITEMS = 256;
/** Category matrices kept in memory (each 10k categories × 384 dims is 16 MB). */
const KEPT_CLASSIFIERS = 4;

function classifierKey(request: ParsedClassifyRequest, taxonomyHash: string): string {
  const { items: _items, taxonomy: _taxonomy, labels: _labels, ...options } = request;
  return JSON.stringify({ taxonomyHash, ...options });
}

export function registerClassifyRoutes(app: FastifyInstance, context: RouteContext): void {
  const kept = new Map<string, Promise<TaxonomyClassifier>>();

  const classifierFor = (request: ParsedClassifyRequest, signal: AbortSignal): Promise<TaxonomyClassifier> => {
    const taxonomy = requestTaxonomy(request);
    const key = classifierKey(request, taxonomy.hash);
    const existing = kept.get(key);
    if (existing !== undefined) {
      // Most recently used last.
      kept.delete(key);
      kept.set(key, existing);
      return existing;
    }
    // The gateway keeps its matrices in memory (the kept map), not in the disk cache.
    const opened = TaxonomyClassifier.open(context.deps.engine, taxonomy, requestClassifierOptions(request), { signal });
    // A failed or cancelled build is forgotten, so the next request tries again.
    opened.catch(() => kept.delete(key));
    kept.set(key, opened);
    while (kept.size > KEPT_CLASSIFIERS) {
      const [oldest, evicted] = kept.entries().next().value ?? [];
      if (oldest === undefined || evicted === undefined) break;
      kept.delete(oldest);
      void evicted.then((classifier) => classifier.close()).catch(() => undefined);
    }
    return opened;
  };

  app.addHook('onClose', async () => {
    const all = [...kept.values()];
    kept.clear();
    await Promise.all(all.map((opened) => opened.then((classifier) => classifier.close()).catch(() => undefined)));
  });

  app.post('/v1/classify', async (request, reply) => {
    const parsed = parseWith(ClassifyRequest, request.body, 'classify request');
    if (parsed.items.length > MAX_SYNC_CLASSIFY_ITEMS) {
      throw new ShoalError(
        ErrorCode.INPUT_TOO_LARGE,
        `POST /v1/classify takes at most ${MAX_SYNC_CLASSIFY_ITEMS} items (got ${parsed.items.length}); classify a catalog with \`shoal classify CATALOG --taxonomy FILE --nats URL\`, which fans it out as JetStream jobs`,
        { details: { limit: MAX_SYNC_CLASSIFY_ITEMS } },
      );
    }
    return context.call(reply)(async (signal) => {
      const classifier = await classifierFor(parsed, signal);
      const items = await classifier.classify(parsed.items, { signal });
      return { model: parsed.model, categories: classifier.taxonomy.categories.length, items };
    });
  });
}
