import type { FastifyInstance } from 'fastify';
import { JobId } from '../../adapters/protocol/jobs.js';

/**
 * The ids of the jobs this gateway accepted lately (POST /v1/jobs, /v1/ingest, /v1/classify as a
 * job), newest last, for GET /v1/jobs (the web console's runs page). Every such answer carries
 * `Location: /v1/jobs/<id>`: one onResponse hook records them all, so no route has to know about
 * the list. The ids only: each status is read where GET /v1/jobs/:id reads it, so the list shows
 * what any replica would. Bounded (the oldest id goes first); a gateway restart starts it empty.
 */

/** Ids kept at most. */
export const MAX_RECENT_JOBS = 200;

const JOB_LOCATION = /^\/v1\/jobs\/([^/?#]+)$/;

export class RecentJobs {
  readonly #ids = new Set<string>();
  readonly #limit: number;

  constructor(limit: number = MAX_RECENT_JOBS) {
    this.#limit = limit;
  }

  remember(id: string): void {
    // Re-accepting an id (an idempotent resubmission) moves it to the newest end.
    this.#ids.delete(id);
    this.#ids.add(id);
    while (this.#ids.size > this.#limit) {
      const oldest = this.#ids.values().next();
      if (oldest.done === true) break;
      this.#ids.delete(oldest.value);
    }
  }

  /** An id whose status is gone (expired from its bucket) is dropped. */
  forget(id: string): void {
    this.#ids.delete(id);
  }

  /** Up to `limit` ids, the newest first. */
  newest(limit: number): string[] {
    return [...this.#ids].reverse().slice(0, limit);
  }

  /** Records the id of every accepted job: a POST answered 200/202 with a job Location. */
  register(app: FastifyInstance): void {
    app.addHook('onResponse', async (request, reply) => {
      if (request.method !== 'POST' || (reply.statusCode !== 200 && reply.statusCode !== 202)) return;
      const location = reply.getHeader('location');
      const id = typeof location === 'string' ? JOB_LOCATION.exec(location)?.[1] : undefined;
      if (id !== undefined && JobId.safeParse(id).success) this.remember(id);
    });
  }
}
