import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * No Qdrant server runs on these machines, so the Qdrant sink is tested against this small HTTP
 * server implementing the part of Qdrant's documented REST API (https://api.qdrant.tech) the sink
 * uses: collections exists / get / create, payload index, points upsert / retrieve / delete (by
 * ids or filter) / scroll / count / query, the filter language (must, should, must_not, match
 * value / any, range, is_null) and Qdrant's rules that matter to a client: point ids are unsigned
 * integers or UUIDs, vector sizes are checked, Cosine vectors are normalised on upsert, Euclid
 * scores are distances (ascending), responses are wrapped in {result, status, time}.
 * Exact search (no HNSW): what a real Qdrant returns for small collections.
 */

type Payload = Record<string, unknown>;
interface Point { id: string | number; dense: number[]; sparse?: { indices: number[]; values: number[] } | undefined; payload: Payload }
interface Collection { size: number; distance: 'Cosine' | 'Euclid' | 'Dot'; named: boolean; points: Map<string, Point> }

export interface QdrantFakeHandle {
  readonly port: number;
  readonly collections: ReadonlyMap<string, Collection>;
  /** Requests seen, `METHOD path` (for asserting what the client called). */
  readonly requests: string[];
  stop(): Promise<void>;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

class HttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

function checkId(id: unknown): string | number {
  if (typeof id === 'number' && Number.isInteger(id) && id >= 0) return id;
  if (typeof id === 'string' && UUID.test(id)) return id.toLowerCase();
  throw new HttpError(400, `Format error in JSON body: value ${JSON.stringify(id)} is not a valid point ID, valid values are either an unsigned integer or a UUID`);
}

function matches(filter: unknown, payload: Payload): boolean {
  if (typeof filter !== 'object' || filter === null) return true;
  const f = filter as Record<string, unknown>;
  if ('key' in f || 'is_null' in f) return condition(f, payload);
  const all = (list: unknown): unknown[] => (Array.isArray(list) ? list : list === undefined ? [] : [list]);
  if (!all(f.must).every((c) => matches(c, payload))) return false;
  const should = all(f.should);
  if (should.length > 0 && !should.some((c) => matches(c, payload))) return false;
  return !all(f.must_not).some((c) => matches(c, payload));
}

function condition(c: Record<string, unknown>, payload: Payload): boolean {
  if ('is_null' in c) {
    const key = String((c.is_null as { key: string }).key);
    return key in payload && payload[key] === null;
  }
  const value = payload[String(c.key)];
  const match = c.match as { value?: unknown; any?: unknown[] } | undefined;
  if (match !== undefined) {
    if ('value' in match) return value !== null && value !== undefined && value === match.value;
    if (Array.isArray(match.any)) return match.any.includes(value);
  }
  const range = c.range as { lt?: number; lte?: number; gt?: number; gte?: number } | undefined;
  if (range !== undefined) {
    if (typeof value !== 'number') return false;
    return (range.lt === undefined || value < range.lt) && (range.lte === undefined || value <= range.lte) &&
      (range.gt === undefined || value > range.gt) && (range.gte === undefined || value >= range.gte);
  }
  throw new HttpError(400, `unsupported condition ${JSON.stringify(c)}`);
}

function score(collection: Collection, query: number[], vector: number[]): number {
  let dot = 0;
  let l2 = 0;
  for (let i = 0; i < query.length; i++) {
    dot += (query[i] ?? 0) * (vector[i] ?? 0);
    l2 += ((query[i] ?? 0) - (vector[i] ?? 0)) ** 2;
  }
  if (collection.distance === 'Euclid') return Math.sqrt(l2);
  if (collection.distance === 'Cosine') return dot / (Math.hypot(...query) || 1);
  return dot;
}

function normalise(vector: number[]): number[] {
  const norm = Math.hypot(...vector);
  return norm === 0 ? vector : vector.map((v) => v / norm);
}

async function body(request: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  return text === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
}

export async function startQdrantFake(): Promise<QdrantFakeHandle> {
  const collections = new Map<string, Collection>();
  const requests: string[] = [];
  const get = (name: string): Collection => {
    const found = collections.get(name);
    if (found === undefined) throw new HttpError(404, `Not found: Collection \`${name}\` doesn't exist!`);
    return found;
  };
  const view = (point: Point, withPayload: boolean): Record<string, unknown> => ({ id: point.id, version: 0, ...(withPayload ? { payload: point.payload } : {}) });

  const route = async (method: string, path: string, input: Record<string, unknown>): Promise<unknown> => {
    const parts = path.split('/').filter((part) => part !== '').map(decodeURIComponent);
    if (parts[0] !== 'collections' || parts[1] === undefined) throw new HttpError(404, `no route ${method} ${path}`);
    const name = parts[1];
    const rest = parts.slice(2).join('/');
    if (method === 'GET' && rest === 'exists') return { exists: collections.has(name) };
    if (method === 'GET' && rest === '') {
      const c = get(name);
      const vectors = c.named ? { dense: { size: c.size, distance: c.distance } } : { size: c.size, distance: c.distance };
      return { status: 'green', points_count: c.points.size, config: { params: { vectors } } };
    }
    if (method === 'PUT' && rest === '') {
      if (collections.has(name)) throw new HttpError(409, `Wrong input: Collection \`${name}\` already exists!`);
      const vectors = input.vectors as Record<string, unknown>;
      const spec = (typeof vectors.size === 'number' ? vectors : vectors.dense) as { size: number; distance: Collection['distance'] };
      collections.set(name, { size: spec.size, distance: spec.distance, named: typeof vectors.size !== 'number', points: new Map() });
      return true;
    }
    if (method === 'PUT' && rest === 'index') return { operation_id: 0, status: 'completed' };
    const c = get(name);
    if (method === 'PUT' && rest === 'points') {
      const points = input.points as { id: unknown; vector: unknown; payload?: Payload }[];
      for (const point of points) {
        const id = checkId(point.id);
        const vector = point.vector as number[] | { dense?: number[]; sparse?: Point['sparse'] };
        const dense = Array.isArray(vector) ? vector : vector.dense;
        if (dense === undefined || dense.length !== c.size) throw new HttpError(400, `Wrong input: Vector dimension error: expected dim: ${c.size}, got ${dense?.length ?? 0}`);
        c.points.set(String(id), { id, dense: c.distance === 'Cosine' ? normalise(dense) : dense, sparse: Array.isArray(vector) ? undefined : vector.sparse, payload: point.payload ?? {} });
      }
      return { operation_id: 0, status: 'completed' };
    }
    if (method === 'POST' && rest === 'points') {
      const ids = (input.ids as unknown[]).map((id) => String(checkId(id)));
      return ids.flatMap((id) => {
        const point = c.points.get(id);
        return point === undefined ? [] : [view(point, input.with_payload !== false)];
      });
    }
    if (method === 'POST' && rest === 'points/delete') {
      if (Array.isArray(input.points)) for (const id of input.points) c.points.delete(String(checkId(id)));
      else for (const [id, point] of c.points) if (matches(input.filter, point.payload)) c.points.delete(id);
      return { operation_id: 0, status: 'completed' };
    }
    if (method === 'POST' && rest === 'points/count') return { count: [...c.points.values()].filter((p) => matches(input.filter, p.payload)).length };
    if (method === 'POST' && rest === 'points/scroll') {
      const all = [...c.points.values()].filter((p) => matches(input.filter, p.payload)).sort((a, b) => (String(a.id) < String(b.id) ? -1 : 1));
      const from = input.offset === undefined || input.offset === null ? 0 : all.findIndex((p) => String(p.id) === String(input.offset));
      const limit = Number(input.limit ?? 10);
      const page = all.slice(from, from + limit);
      return { points: page.map((p) => view(p, input.with_payload !== false)), next_page_offset: all[from + limit]?.id ?? null };
    }
    if (method === 'POST' && rest === 'points/query') {
      const query = input.query as number[];
      if (!Array.isArray(query) || query.length !== c.size) throw new HttpError(400, `Wrong input: Vector dimension error: expected dim: ${c.size}, got ${Array.isArray(query) ? query.length : 0}`);
      const ascending = c.distance === 'Euclid';
      const scored = [...c.points.values()].filter((p) => matches(input.filter, p.payload)).map((p) => ({ p, s: score(c, query, p.dense) }));
      scored.sort((a, b) => (ascending ? a.s - b.s : b.s - a.s));
      return { points: scored.slice(0, Number(input.limit ?? 10)).map(({ p, s }) => ({ ...view(p, input.with_payload === true), score: s })) };
    }
    throw new HttpError(404, `no route ${method} ${path}`);
  };

  const server: Server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const started = process.hrtime.bigint();
    const path = new URL(request.url ?? '/', 'http://x').pathname;
    requests.push(`${request.method ?? ''} ${path}`);
    const reply = (status: number, payload: unknown): void => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(payload));
    };
    body(request)
      .then((input) => route(request.method ?? 'GET', path, input))
      .then((result) => reply(200, { result, status: 'ok', time: Number(process.hrtime.bigint() - started) / 1e9 }))
      .catch((error: unknown) => {
        const status = error instanceof HttpError ? error.status : 500;
        reply(status, { status: { error: error instanceof Error ? error.message : String(error) }, time: 0 });
      });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    collections,
    requests,
    stop: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
