import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * No Qdrant server runs on these machines, so the Qdrant sink is tested against this small HTTP
 * server implementing the part of Qdrant's documented REST API (https://api.qdrant.tech) the sink
 * uses: collections list / exists / get / create, payload index, points upsert / retrieve / delete (by
 * ids or filter) / scroll / count / query (dense; sparse on a named sparse vector; max_sim on a
 * named multivector), the filter language (must, should, must_not, match value / any, range,
 * is_null, is_empty, has_id; nested keys `a.b`, a list matching by any item) and Qdrant's rules that matter to a client: point ids are unsigned
 * integers or UUIDs, vector sizes are checked, Cosine vectors are normalised on upsert, Euclid
 * scores are distances (ascending), responses are wrapped in {result, status, time}. A vector's
 * `datatype` is kept as Qdrant keeps it: `float16` values rounded to half precision (after the
 * Cosine normalisation), `uint8` values required to be integers 0..255 and stored as given (not
 * normalised; Cosine then divides by both norms); `with_vector` on retrieve returns the stored form.
 * Exact search (no HNSW): what a real Qdrant returns for small collections.
 */

type Payload = Record<string, unknown>;
interface Point { id: string | number; dense: number[]; sparse?: { indices: number[]; values: number[] } | undefined; multi?: number[][] | undefined; payload: Payload }
interface Collection {
  size: number;
  distance: 'Cosine' | 'Euclid' | 'Dot';
  datatype?: 'float16' | 'uint8' | undefined;
  named: boolean;
  sparseNames: readonly string[];
  /** The named multivector (max_sim), if the collection has one. */
  multi?: { name: string; size: number } | undefined;
  points: Map<string, Point>;
}

/** The nearest half-precision value, ties to even (subnormals on the 2^-24 grid); written apart from Shoal's own conversion. */
function toHalf(value: number): number {
  const f = Math.fround(value);
  if (f === 0 || !Number.isFinite(f)) return f;
  const exponent = Math.max(Math.floor(Math.log2(Math.abs(f))), -14);
  const step = 2 ** (exponent - 10);
  const scaled = f / step;
  const floor = Math.floor(scaled);
  const rest = scaled - floor;
  const rounded = rest > 0.5 || (rest === 0.5 && floor % 2 !== 0) ? floor + 1 : floor;
  return rounded * step;
}

/** A vector as the collection stores it: its datatype applied (Cosine float vectors normalised first). */
function stored(c: Collection, dense: number[]): number[] {
  if (c.datatype === 'uint8') {
    if (dense.some((v) => !Number.isInteger(v) || v < 0 || v > 255)) throw new HttpError(400, 'Wrong input: uint8 vectors hold integers from 0 to 255');
    return dense;
  }
  const base = c.distance === 'Cosine' ? normalise(dense) : dense;
  return c.datatype === 'float16' ? base.map(toHalf) : base;
}

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

/** `id` is the point's id, for `has_id` conditions. */
function matches(filter: unknown, payload: Payload, id?: string | number): boolean {
  if (typeof filter !== 'object' || filter === null) return true;
  const f = filter as Record<string, unknown>;
  if ('has_id' in f) return Array.isArray(f.has_id) && f.has_id.some((wanted) => String(wanted).toLowerCase() === String(id));
  if ('key' in f || 'is_null' in f || 'is_empty' in f) return condition(f, payload);
  const all = (list: unknown): unknown[] => (Array.isArray(list) ? list : list === undefined ? [] : [list]);
  if (!all(f.must).every((c) => matches(c, payload, id))) return false;
  const should = all(f.should);
  if (should.length > 0 && !should.some((c) => matches(c, payload, id))) return false;
  return !all(f.must_not).some((c) => matches(c, payload, id));
}

/**
 * A payload value by Qdrant's key syntax: `a.b` is field b of the object under a (metadata
 * fields); undefined when a part is missing.
 */
function valueAt(payload: Payload, key: string): unknown {
  let value: unknown = payload;
  for (const part of key.split('.')) {
    if (typeof value !== 'object' || value === null || Array.isArray(value) || !Object.hasOwn(value, part)) return undefined;
    value = (value as Payload)[part];
  }
  return value;
}

function condition(c: Record<string, unknown>, payload: Payload): boolean {
  if ('is_null' in c) {
    const key = String((c.is_null as { key: string }).key);
    const value = valueAt(payload, key);
    return value === null;
  }
  // Qdrant: true when the key is absent, null or an empty list.
  if ('is_empty' in c) {
    const value = valueAt(payload, String((c.is_empty as { key: string }).key));
    return value === undefined || value === null || (Array.isArray(value) && value.length === 0);
  }
  const value = valueAt(payload, String(c.key));
  const match = c.match as { value?: unknown; any?: unknown[] } | undefined;
  if (match !== undefined) {
    // Qdrant's match takes keywords, integers and booleans (`any`: all keywords or all integers), never fractions.
    const matchable = (item: unknown): boolean => typeof item === 'string' || typeof item === 'boolean' || Number.isInteger(item);
    if ('value' in match && !matchable(match.value)) throw new HttpError(400, 'Wrong input: match value must be a keyword, an integer or a boolean');
    if (Array.isArray(match.any) && !(match.any.every((item) => typeof item === 'string') || match.any.every((item) => Number.isInteger(item)))) {
      throw new HttpError(400, 'Wrong input: match any takes keywords or integers');
    }
    // A list value matches when any of its items does (Qdrant's rule for arrays in payloads).
    const items = Array.isArray(value) ? value : [value];
    if ('value' in match) return items.some((item) => item !== null && item !== undefined && item === match.value);
    if (Array.isArray(match.any)) return items.some((item) => match.any?.includes(item) === true);
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
  if (collection.distance === 'Cosine') return dot / ((Math.hypot(...query) || 1) * (Math.hypot(...vector) || 1));
  return dot;
}

function normalise(vector: number[]): number[] {
  const norm = Math.hypot(...vector);
  return norm === 0 ? vector : vector.map((v) => v / norm);
}

/**
 * A query on a named sparse vector (`{query: {indices, values}, using}`): Qdrant scores sparse
 * vectors by dot product over its inverted index, so only points whose sparse vector shares a
 * term with the query are returned, best first; `with_vector` naming the sparse vector returns it.
 */
function sparseQuery(c: Collection, input: Record<string, unknown>): unknown {
  const query = input.query as { indices?: unknown; values?: unknown } | null;
  const indices: unknown[] = Array.isArray(query?.indices) ? query.indices : [];
  const values: unknown[] = Array.isArray(query?.values) ? query.values : [];
  if (!Array.isArray(query?.indices) || !Array.isArray(query?.values) || indices.length !== values.length) {
    throw new HttpError(400, 'Wrong input: a sparse query needs indices and values of the same length');
  }
  if (new Set(indices).size !== indices.length) throw new HttpError(400, 'Validation error: indices must be unique');
  const weights = new Map<number, number>(indices.map((index, at) => [Number(index), Number(values[at])]));
  const scored = [...c.points.values()].filter((p) => p.sparse !== undefined && matches(input.filter, p.payload)).flatMap((p) => {
    let dot = 0;
    let shared = false;
    p.sparse?.indices.forEach((index, at) => {
      const weight = weights.get(index);
      if (weight === undefined) return;
      shared = true;
      dot += weight * (p.sparse?.values[at] ?? 0);
    });
    return shared ? [{ p, s: dot }] : [];
  });
  scored.sort((a, b) => b.s - a.s);
  const name = String(input.using);
  const withSparse = input.with_vector === true || (Array.isArray(input.with_vector) && input.with_vector.includes(name));
  return {
    points: scored.slice(0, Number(input.limit ?? 10)).map(({ p, s }) => ({
      id: p.id, version: 0, ...(input.with_payload === true ? { payload: p.payload } : {}), score: s, ...(withSparse ? { vector: { [name]: p.sparse } } : {}),
    })),
  };
}

/** A query on the multivector (`max_sim`, Cosine): Σ over query vectors of the best cosine with the point's vectors. */
function maxSimQuery(c: Collection, input: Record<string, unknown>): unknown {
  const query = input.query;
  if (!Array.isArray(query) || query.length === 0 || !query.every((token) => Array.isArray(token) && token.length === c.multi?.size)) {
    throw new HttpError(400, `Wrong input: a multivector query needs vectors of dim ${c.multi?.size ?? 0}`);
  }
  const tokens = (query as number[][]).map(normalise);
  const scored = [...c.points.values()].filter((p) => p.multi !== undefined && matches(input.filter, p.payload, p.id)).map((p) => ({
    p,
    s: tokens.reduce((sum, q) => sum + Math.max(...(p.multi ?? []).map((d) => d.reduce((dot, value, i) => dot + value * (q[i] ?? 0), 0))), 0),
  }));
  scored.sort((a, b) => b.s - a.s);
  return { points: scored.slice(0, Number(input.limit ?? 10)).map(({ p, s }) => ({ id: p.id, version: 0, ...(input.with_payload === true ? { payload: p.payload } : {}), score: s })) };
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
    // GET /collections: every collection's name (Qdrant's list-collections answer).
    if (method === 'GET' && parts.length === 1 && parts[0] === 'collections') return { collections: [...collections.keys()].map((name) => ({ name })) };
    if (parts[0] !== 'collections' || parts[1] === undefined) throw new HttpError(404, `no route ${method} ${path}`);
    const name = parts[1];
    const rest = parts.slice(2).join('/');
    if (method === 'GET' && rest === 'exists') return { exists: collections.has(name) };
    if (method === 'GET' && rest === '') {
      const c = get(name);
      const vectors = c.named ? { dense: { size: c.size, distance: c.distance } } : { size: c.size, distance: c.distance };
      if (c.datatype !== undefined) Object.assign(c.named ? (vectors as { dense: object }).dense : vectors, { datatype: c.datatype });
      return { status: 'green', points_count: c.points.size, config: { params: { vectors } } };
    }
    if (method === 'PUT' && rest === '') {
      if (collections.has(name)) throw new HttpError(409, `Wrong input: Collection \`${name}\` already exists!`);
      const vectors = input.vectors as Record<string, unknown>;
      const spec = (typeof vectors.size === 'number' ? vectors : vectors.dense) as { size: number; distance: Collection['distance']; datatype?: string };
      if (spec.datatype !== undefined && !['float32', 'float16', 'uint8'].includes(spec.datatype)) throw new HttpError(400, `Wrong input: unknown datatype ${spec.datatype}`);
      const datatype = spec.datatype === 'float16' || spec.datatype === 'uint8' ? spec.datatype : undefined;
      const sparseNames = Object.keys((input.sparse_vectors ?? {}) as Record<string, unknown>);
      // A named vector with `multivector_config: {comparator: max_sim}` holds token vectors (Cosine only here).
      const multiEntry = Object.entries(vectors).find(([, params]) => typeof params === 'object' && params !== null && 'multivector_config' in params);
      const multiParams = multiEntry?.[1] as { size: number; distance: string; multivector_config: { comparator?: string } } | undefined;
      if (multiParams !== undefined && (multiParams.multivector_config.comparator !== 'max_sim' || multiParams.distance !== 'Cosine')) throw new HttpError(400, 'Wrong input: multivector_config needs comparator max_sim (Cosine in this fake)');
      const multi = multiEntry === undefined || multiParams === undefined ? undefined : { name: multiEntry[0], size: multiParams.size };
      collections.set(name, { size: spec.size, distance: spec.distance, datatype, named: typeof vectors.size !== 'number', sparseNames, multi, points: new Map() });
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
        const multi = c.multi === undefined || Array.isArray(vector) ? undefined : (vector as Record<string, unknown>)[c.multi.name] as number[][] | undefined;
        if (multi !== undefined && multi.some((token) => token.length !== c.multi?.size)) throw new HttpError(400, `Wrong input: Vector dimension error: expected dim: ${c.multi?.size ?? 0}`);
        c.points.set(String(id), { id, dense: stored(c, dense), sparse: Array.isArray(vector) ? undefined : vector.sparse, multi: multi?.map(normalise), payload: point.payload ?? {} });
      }
      return { operation_id: 0, status: 'completed' };
    }
    if (method === 'POST' && rest === 'points') {
      const ids = (input.ids as unknown[]).map((id) => String(checkId(id)));
      return ids.flatMap((id) => {
        const point = c.points.get(id);
        if (point === undefined) return [];
        const withVector = input.with_vector === true || (Array.isArray(input.with_vector) && input.with_vector.includes('dense'));
        return [{ ...view(point, input.with_payload !== false), ...(withVector ? { vector: c.named ? { dense: point.dense } : point.dense } : {}) }];
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
    if (method === 'POST' && rest === 'points/query' && typeof input.using === 'string' && c.sparseNames.includes(input.using)) return sparseQuery(c, input);
    if (method === 'POST' && rest === 'points/query' && input.using !== undefined && input.using === c.multi?.name) return maxSimQuery(c, input);
    if (method === 'POST' && rest === 'points/query') {
      const query = input.query as number[];
      if (!Array.isArray(query) || query.length !== c.size) throw new HttpError(400, `Wrong input: Vector dimension error: expected dim: ${c.size}, got ${Array.isArray(query) ? query.length : 0}`);
      const ascending = c.distance === 'Euclid';
      const scored = [...c.points.values()].filter((p) => matches(input.filter, p.payload)).map((p) => ({ p, s: score(c, query, p.dense) }));
      scored.sort((a, b) => (ascending ? a.s - b.s : b.s - a.s));
      // `with_vector: ['dense']` (or true) returns the stored vector by name, as Qdrant does for named vectors.
      const withDense = input.with_vector === true || (Array.isArray(input.with_vector) && input.with_vector.includes('dense'));
      return {
        points: scored.slice(0, Number(input.limit ?? 10)).map(({ p, s }) => ({ ...view(p, input.with_payload === true), score: s, ...(withDense ? { vector: c.named ? { dense: p.dense } : p.dense } : {}) })),
      };
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
