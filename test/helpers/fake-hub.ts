import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { join, relative, sep } from 'node:path';

/**
 * A local stand-in for huggingface.co, serving model folders the way the hub does:
 * `GET /api/models/{repo}/revision/{rev}` lists the commit and files (large or binary files as LFS
 * with a sha256, small ones with their git blob sha1), and `GET /{repo}/resolve/{rev}/{path}`
 * serves the bytes with Range support. Every request is recorded, and faults can be injected per
 * file: a dropped connection, corrupted bytes, an error status, a hub that ignores Range.
 */

export interface HubFile {
  path: string;
  content: Buffer;
  lfs: boolean;
  sha256: string;
  /** git blob sha1 of the file, or of its LFS pointer for LFS files (as the hub reports it). */
  blobId: string;
}

export interface HubRepo {
  id: string;
  commit: string;
  files: HubFile[];
}

export interface RecordedRequest {
  method: string;
  path: string;
  /** Range header, or null. */
  range: string | null;
  authorization: string | null;
  status: number;
}

export interface HubFaults {
  /** Close the connection after this many body bytes of `file`, on its next `times` requests (default once). */
  drop?: { file: string; afterBytes: number; times?: number };
  /** Send this many body bytes of `file`, then nothing more while keeping the connection open (default once). */
  stall?: { file: string; afterBytes: number; times?: number };
  /** Serve `file` with one byte flipped (same length), `times` times (default: always). */
  corrupt?: { file: string; times?: number };
  /** Answer requests for `file` with this status, `times` times (default once). */
  failWith?: { file: string; status: number; times?: number };
  /** Answer repository listings with this status, `times` times (default once). */
  failListing?: { status: number; times?: number };
  /** Answer Range requests with the whole file (200), as some proxies do. */
  ignoreRange?: boolean;
}

export interface FakeHubOptions {
  /** Repository id → folder to serve. */
  repos: Record<string, string>;
  /** When set, every request must carry `Authorization: Bearer <token>` (401 otherwise). */
  token?: string;
  /** Files above this size are LFS files even without a binary extension. @default 1 MiB */
  lfsThresholdBytes?: number;
}

const BINARY = /\.(onnx|onnx_data|data|bin|safetensors|h5|msgpack|pt|pth|gguf|png|jpe?g|f32)$/i;

function sha(algorithm: 'sha1' | 'sha256', ...parts: (string | Buffer)[]): string {
  const hash = createHash(algorithm);
  for (const part of parts) hash.update(part);
  return hash.digest('hex');
}

/** git's object id of a blob: sha1 of `blob <size>\0` + content. */
export function gitBlobSha1(content: Buffer | string): string {
  const bytes = typeof content === 'string' ? Buffer.from(content) : content;
  return sha('sha1', `blob ${bytes.length}\0`, bytes);
}

async function listFiles(root: string): Promise<string[]> {
  const entries = await readdir(root, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => relative(root, join(e.parentPath, e.name)).split(sep).join('/'))
    .sort();
}

async function loadRepo(id: string, dir: string, lfsThreshold: number): Promise<HubRepo> {
  const files: HubFile[] = [];
  for (const path of await listFiles(dir)) {
    const content = await readFile(join(dir, path));
    const sha256 = sha('sha256', content);
    const lfs = BINARY.test(path) || content.length > lfsThreshold;
    const pointer = `version https://git-lfs.github.com/spec/v1\noid sha256:${sha256}\nsize ${content.length}\n`;
    files.push({ path, content, lfs, sha256, blobId: gitBlobSha1(lfs ? pointer : content) });
  }
  const commit = sha('sha1', id, ...files.map((f) => `${f.path}:${f.blobId}\n`));
  return { id, commit, files };
}

/** The fault if it applies (no `file`, or the same file) and has uses left, counting this use; else null. */
function consume<T extends { file?: string; times?: number }>(fault: T | undefined, file: string | null, defaultTimes: number): T | null {
  if (fault === undefined || (fault.file !== undefined && fault.file !== file)) return null;
  const left = fault.times ?? defaultTimes;
  if (left <= 0) return null;
  fault.times = left - 1;
  return fault;
}

export class FakeHub {
  readonly requests: RecordedRequest[] = [];
  /** Faults for the next requests; tests set and clear them freely. */
  faults: HubFaults = {};
  readonly #server: Server;
  readonly #repos: Map<string, HubRepo>;
  readonly #token: string | undefined;

  private constructor(server: Server, repos: Map<string, HubRepo>, token: string | undefined) {
    this.#server = server;
    this.#repos = repos;
    this.#token = token;
  }

  static async start(options: FakeHubOptions): Promise<FakeHub> {
    const repos = new Map<string, HubRepo>();
    for (const [id, dir] of Object.entries(options.repos)) repos.set(id, await loadRepo(id, dir, options.lfsThresholdBytes ?? 1024 * 1024));
    let hub: FakeHub | null = null;
    const server = createServer((req, res) => hub?.handle(req, res));
    hub = new FakeHub(server, repos, options.token);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return hub;
  }

  get url(): string {
    const address = this.#server.address();
    if (address === null || typeof address === 'string') throw new Error('fake hub is not listening on a TCP port');
    return `http://127.0.0.1:${address.port}`;
  }

  repo(id: string): HubRepo {
    const repo = this.#repos.get(id);
    if (repo === undefined) throw new Error(`fake hub serves no repo ${id}`);
    return repo;
  }

  file(id: string, path: string): HubFile {
    const file = this.repo(id).files.find((f) => f.path === path);
    if (file === undefined) throw new Error(`fake hub repo ${id} has no ${path}`);
    return file;
  }

  /** Requests for files (resolve URLs) of a repository, optionally of one path. */
  fileRequests(id: string, path?: string): RecordedRequest[] {
    const prefix = `/${id}/resolve/`;
    return this.requests.filter((r) => r.path.startsWith(prefix) && (path === undefined || r.path.endsWith(`/${path}`)));
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve, reject) => this.#server.close((error) => (error ? reject(error) : resolve())));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://hub.local');
    const record: RecordedRequest = {
      method: req.method ?? 'GET',
      path: url.pathname,
      range: req.headers.range ?? null,
      authorization: req.headers.authorization ?? null,
      status: 0,
    };
    this.requests.push(record);
    const reply = (status: number, body: string, headers: Record<string, string> = {}): void => {
      record.status = status;
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers });
      res.end(body);
    };
    if (this.#token !== undefined && req.headers.authorization !== `Bearer ${this.#token}`) {
      reply(401, JSON.stringify({ error: 'Invalid credentials in Authorization header' }), { 'x-error-message': 'Invalid credentials in Authorization header' });
      return;
    }
    const api = /^\/api\/models\/(.+)\/revision\/([^/]+)$/.exec(url.pathname);
    if (api?.[1] !== undefined && api[2] !== undefined) {
      this.listing(api[1], decodeURIComponent(api[2]), reply);
      return;
    }
    const resolve = /^\/(.+?)\/resolve\/([^/]+)\/(.+)$/.exec(url.pathname);
    if (resolve?.[1] !== undefined && resolve[2] !== undefined && resolve[3] !== undefined) {
      const path = resolve[3].split('/').map(decodeURIComponent).join('/');
      this.serveFile(req, res, record, resolve[1], decodeURIComponent(resolve[2]), path, reply);
      return;
    }
    reply(404, JSON.stringify({ error: 'Not Found' }));
  }

  private lookup(id: string, revision: string): HubRepo | 'no-repo' | 'no-revision' {
    const repo = this.#repos.get(id);
    if (repo === undefined) return 'no-repo';
    return revision === 'main' || revision === repo.commit ? repo : 'no-revision';
  }

  private listing(id: string, revision: string, reply: (status: number, body: string, headers?: Record<string, string>) => void): void {
    const failure = consume(this.faults.failListing, null, 1);
    if (failure !== null) return reply(failure.status, JSON.stringify({ error: 'injected failure' }));
    const repo = this.lookup(id, revision);
    if (repo === 'no-repo') return reply(404, JSON.stringify({ error: 'Repository not found' }), { 'x-error-message': 'Repository not found' });
    if (repo === 'no-revision') return reply(404, JSON.stringify({ error: `Invalid rev id: ${revision}` }), { 'x-error-message': 'Revision Not Found' });
    const siblings = repo.files.map((f) => ({
      rfilename: f.path,
      size: f.content.length,
      blobId: f.blobId,
      ...(f.lfs ? { lfs: { sha256: f.sha256, size: f.content.length, pointerSize: 134 } } : {}),
    }));
    reply(200, JSON.stringify({ _id: repo.commit.slice(0, 24), id: repo.id, sha: repo.commit, private: false, siblings }));
  }

  private serveFile(
    req: IncomingMessage,
    res: ServerResponse,
    record: RecordedRequest,
    id: string,
    revision: string,
    path: string,
    reply: (status: number, body: string, headers?: Record<string, string>) => void,
  ): void {
    const repo = this.lookup(id, revision);
    if (typeof repo === 'string') return reply(404, JSON.stringify({ error: 'Repository not found' }), { 'x-error-message': 'Repository not found' });
    const file = repo.files.find((f) => f.path === path);
    if (file === undefined) return reply(404, JSON.stringify({ error: 'Entry not found' }), { 'x-error-message': 'Entry not found' });
    const failure = consume(this.faults.failWith, path, 1);
    if (failure !== null) return reply(failure.status, JSON.stringify({ error: 'injected failure' }));
    let content = file.content;
    if (consume(this.faults.corrupt, path, Number.POSITIVE_INFINITY) !== null) {
      content = Buffer.from(content);
      const middle = content.length >> 1;
      content[middle] = (content[middle] ?? 0) ^ 0xff;
    }
    const headers: Record<string, string> = {
      'content-type': 'application/octet-stream',
      etag: `"${file.lfs ? file.sha256 : file.blobId}"`,
      'x-repo-commit': repo.commit,
      'accept-ranges': 'bytes',
    };
    let status = 200;
    let body = content;
    const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    if (range?.[1] !== undefined && this.faults.ignoreRange !== true) {
      const start = Number(range[1]);
      const end = range[2] === undefined || range[2] === '' ? content.length - 1 : Math.min(Number(range[2]), content.length - 1);
      if (start >= content.length) return reply(416, '', { 'content-range': `bytes */${content.length}` });
      status = 206;
      body = content.subarray(start, end + 1);
      headers['content-range'] = `bytes ${start}-${end}/${content.length}`;
    }
    record.status = status;
    res.writeHead(status, { ...headers, 'content-length': String(body.length) });
    const drop = consume(this.faults.drop, path, 1);
    if (drop !== null) {
      // Some of the promised bytes, then a clean close: the client sees a body shorter than content-length.
      res.write(body.subarray(0, Math.min(drop.afterBytes, body.length)), () => res.socket?.end());
      return;
    }
    const stall = consume(this.faults.stall, path, 1);
    if (stall !== null) {
      res.write(body.subarray(0, Math.min(stall.afterBytes, body.length))); // and never end: close() cuts it
      return;
    }
    res.end(body);
  }
}
