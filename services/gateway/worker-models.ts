import type { WorkerInfo } from '../../adapters/protocol/jobs.js';
import type { ModelCard } from './context.js';

/**
 * GET /v1/models of a gateway in front of NATS workers: the union of what the workers say they
 * serve, `resident` when some worker holds the model now. Discovery waits for replies, so the
 * list is cached briefly and fetched once however many requests ask at the same time.
 */

export const MODEL_LIST_TTL_MS = 5_000;

export function modelCards(workers: readonly WorkerInfo[]): ModelCard[] {
  const resident = new Set(workers.flatMap((w) => w.resident));
  const names = [...new Set(workers.flatMap((w) => w.serves))].sort();
  return names.map((id) => ({ id, resident: resident.has(id) }));
}

export function cachedModelList(discover: () => Promise<readonly WorkerInfo[]>, ttlMs: number = MODEL_LIST_TTL_MS): () => Promise<readonly ModelCard[]> {
  let cached: { at: number; cards: Promise<readonly ModelCard[]> } | null = null;
  return () => {
    const now = Date.now();
    if (cached === null || now - cached.at > ttlMs) {
      const cards = discover().then(modelCards);
      const entry = { at: now, cards };
      // A failed discovery is not cached: the next request asks again.
      cards.catch(() => {
        if (cached === entry) cached = null;
      });
      cached = entry;
    }
    return cached.cards;
  };
}
