import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readlink, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { parseWith } from '../protocol/validate.js';
import { selectDownloadFiles, type Precision, type RepoFile } from './file-selection.js';
import { isCommitHash, repoCacheDir } from './hf-cache.js';

/**
 * Downloads a model repository from a Hugging Face compatible hub into the hub cache layout.
 * Each file goes to `blobs/<etag>.incomplete` first (resumed with a Range request after an
 * interruption), is checked against the size and sha256 (LFS) or git blob sha1 the hub lists,
 * and only then renamed into place and linked from `snapshots/<commit>/`: a crash never leaves
 * a file that looks complete but is not.
 */

export interface HubOptions {
  /** Hub base URL (HF_ENDPOINT); default https://huggingface.co. */
  endpoint: string;
  token?: string | undefined;
  cacheDir: string;
  precision?: Precision;
  /** Per-request timeout in milliseconds. */
  timeoutMs?: number;
  /** Attempts per file (network errors and 5xx are retried, resuming partial downloads). */
  attempts?: number;
  onProgress?: (event: DownloadProgress) => void;
}

export interface DownloadProgress {
  repo: string;
  file: string;
  receivedBytes: number;
  totalBytes: number | null;
  done: boolean;
}

const Sibling = z.looseObject({
  rfilename: z.string(),
  size: z.number().int().nonnegative().optional(),
  blobId: z.string().optional(),
  lfs: z.looseObject({ sha256: z.string(), size: z.number().int().nonnegative().optional() }).nullable().optional(),
});
type Sibling = z.infer<typeof Sibling>;

const RepoInfo = z.looseObject({
  sha: z.string().regex(/^[0-9a-f]{40}$/),
  siblings: z.array(Sibling),
});

const DEFAULT_TIMEOUT_MS = 60_000;
const DEFAULT_ATTEMPTS = 4;

function safeRepoPath(path: string): boolean {
  return path.length > 0 && !path.startsWith('/') && !path.split('/').some((part) => part === '..' || part === '' || part === '.');
}

function headers(options: HubOptions, extra: Record<string, string> = {}): Record<string, string> {
  const out: Record<string, string> = { 'user-agent': 'shoal/0.1', ...extra };
  if (options.token !== undefined && options.token !== '') out.authorization = `Bearer ${options.token}`;
  return out;
}

function endpointUrl(options: HubOptions, path: string): string {
  return `${options.endpoint.replace(/\/+$/, '')}/${path}`;
}

async function fetchChecked(url: string, init: RequestInit, what: string, timeoutMs: number): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs), redirect: 'follow' });
  } catch (error) {
    throw new ShoalError(ErrorCode.DOWNLOAD_FAILED, `${what}: cannot reach ${url}: ${String(error)}`, { cause: error });
  }
  if (response.status === 401 || response.status === 403) {
    throw new ShoalError(ErrorCode.MODEL_NOT_FOUND, `${what}: the hub refused access (HTTP ${response.status}); set HF_TOKEN for gated or private models`);
  }
  if (response.status === 404) {
    throw new ShoalError(ErrorCode.MODEL_NOT_FOUND, `${what}: not found on the hub (${url})`);
  }
  if (!response.ok && response.status !== 206) {
    throw new ShoalError(ErrorCode.DOWNLOAD_FAILED, `${what}: HTTP ${response.status} from ${url}`, { details: { status: response.status } });
  }
  return response;
}

export async function fetchRepoInfo(repo: string, revision: string, options: HubOptions): Promise<z.infer<typeof RepoInfo>> {
  const url = endpointUrl(options, `api/models/${repo}/revision/${encodeURIComponent(revision)}?blobs=true`);
  const response = await fetchChecked(url, { headers: headers(options) }, `model ${repo}@${revision}`, options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  let body: unknown;
  try {
    body = await response.json();
  } catch (error) {
    throw new ShoalError(ErrorCode.DOWNLOAD_FAILED, `model ${repo}@${revision}: the hub answered with invalid JSON`, { cause: error });
  }
  return parseWith(RepoInfo, body, `hub answer for ${repo}@${revision}`, ErrorCode.DOWNLOAD_FAILED);
}

function expectedSize(sibling: Sibling): number | undefined {
  return sibling.lfs?.size ?? sibling.size;
}

/** The blob name the hub cache uses: sha256 for LFS files, the git blob id otherwise. */
function blobName(sibling: Sibling): string | null {
  const name = sibling.lfs?.sha256 ?? sibling.blobId ?? null;
  return name !== null && /^[0-9a-f]{40,64}$/.test(name) ? name : null;
}

async function fileSize(path: string): Promise<number | null> {
  try {
    return (await stat(path)).size;
  } catch {
    return null;
  }
}

/** sha256 of the file, or the git blob sha1 (`blob <size>\0` + content) for non-LFS files. */
async function digestOf(path: string, kind: 'sha256' | 'git-sha1'): Promise<string> {
  const hash = createHash(kind === 'sha256' ? 'sha256' : 'sha1');
  if (kind === 'git-sha1') hash.update(`blob ${(await stat(path)).size}\0`);
  await pipeline(createReadStream(path), hash);
  return hash.digest('hex');
}

async function verify(path: string, sibling: Sibling, what: string): Promise<void> {
  const size = expectedSize(sibling);
  const actual = await fileSize(path);
  if (size !== undefined && actual !== size) {
    throw new ShoalError(ErrorCode.DOWNLOAD_FAILED, `${what}: size ${actual} does not match the hub's ${size}`);
  }
  const expected = sibling.lfs?.sha256 ?? sibling.blobId;
  if (expected === undefined) return;
  const kind = sibling.lfs?.sha256 !== undefined ? 'sha256' : 'git-sha1';
  const digest = await digestOf(path, kind);
  if (digest !== expected) {
    throw new ShoalError(ErrorCode.DOWNLOAD_FAILED, `${what}: ${kind} ${digest} does not match the hub's ${expected}`);
  }
}

async function downloadOnce(url: string, partial: string, sibling: Sibling, repo: string, options: HubOptions): Promise<void> {
  const have = (await fileSize(partial)) ?? 0;
  const total = expectedSize(sibling) ?? null;
  if (total !== null && have === total) return;
  const extra: Record<string, string> = have > 0 ? { range: `bytes=${have}-` } : {};
  const what = `download of ${repo}/${sibling.rfilename}`;
  const response = await fetchChecked(url, { headers: headers(options, extra) }, what, options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  if (response.body === null) throw new ShoalError(ErrorCode.DOWNLOAD_FAILED, `${what}: empty response`);
  // A server that ignores Range answers 200 with the whole file: start over instead of appending.
  const append = have > 0 && response.status === 206;
  let received = append ? have : 0;
  const source = Readable.fromWeb(response.body as WebReadableStream<Uint8Array>);
  source.on('data', (chunk: Buffer) => {
    received += chunk.length;
    options.onProgress?.({ repo, file: sibling.rfilename, receivedBytes: received, totalBytes: total, done: false });
  });
  await pipeline(source, createWriteStream(partial, { flags: append ? 'a' : 'w' }));
}

function isRetryable(error: unknown): boolean {
  return error instanceof ShoalError && error.code === ErrorCode.DOWNLOAD_FAILED;
}

async function downloadFile(repo: string, commit: string, sibling: Sibling, options: HubOptions): Promise<void> {
  const repoDir = repoCacheDir(options.cacheDir, repo);
  const snapshotPath = join(repoDir, 'snapshots', commit, sibling.rfilename);
  const blob = blobName(sibling);
  const target = blob === null ? snapshotPath : join(repoDir, 'blobs', blob);
  const what = `${repo}/${sibling.rfilename}`;
  if ((await fileSize(target)) !== null && (await fileSize(snapshotPath)) !== null) return;
  await mkdir(dirname(target), { recursive: true });
  await mkdir(dirname(snapshotPath), { recursive: true });
  if ((await fileSize(target)) === null) {
    const partial = `${target}.incomplete`;
    const url = endpointUrl(options, `${repo}/resolve/${commit}/${sibling.rfilename.split('/').map(encodeURIComponent).join('/')}`);
    const attempts = options.attempts ?? DEFAULT_ATTEMPTS;
    for (let attempt = 1; ; attempt++) {
      try {
        await downloadOnce(url, partial, sibling, repo, options);
        await verify(partial, sibling, what);
        break;
      } catch (error) {
        // A corrupt partial file must not be resumed: start the next attempt from zero.
        if (error instanceof ShoalError && error.message.includes('does not match')) await rm(partial, { force: true });
        if (attempt >= attempts || !isRetryable(error)) throw error;
        await new Promise((resolve) => setTimeout(resolve, 200 * 2 ** attempt));
      }
    }
    await rename(partial, target);
  }
  if (blob !== null) await linkIntoSnapshot(target, snapshotPath);
  options.onProgress?.({ repo, file: sibling.rfilename, receivedBytes: expectedSize(sibling) ?? 0, totalBytes: expectedSize(sibling) ?? null, done: true });
}

async function linkIntoSnapshot(blobPath: string, snapshotPath: string): Promise<void> {
  const relativeTarget = relative(dirname(snapshotPath), blobPath);
  try {
    if ((await readlink(snapshotPath)) === relativeTarget) return;
  } catch {
    // not a link yet
  }
  const temp = `${snapshotPath}.${process.pid}.link`;
  await rm(temp, { force: true });
  await symlink(relativeTarget, temp);
  await rename(temp, snapshotPath);
}

/**
 * Makes `repo@revision` available in the cache and returns its snapshot folder. Only the files
 * Shoal needs are fetched (see file-selection.ts).
 */
export async function downloadModel(repo: string, revision: string, options: HubOptions): Promise<string> {
  const info = await fetchRepoInfo(repo, revision, options);
  const files: RepoFile[] = info.siblings
    .filter((s) => safeRepoPath(s.rfilename))
    .map((s) => ({ path: s.rfilename, size: expectedSize(s) }));
  const wanted = new Set(selectDownloadFiles(files, options.precision ?? 'fp32'));
  const siblings = info.siblings.filter((s) => wanted.has(s.rfilename));
  if (!siblings.some((s) => s.rfilename.toLowerCase().endsWith('.onnx'))) {
    throw new ShoalError(
      ErrorCode.MODEL_NOT_FOUND,
      `${repo}@${revision} has no ONNX graph (looked for *.onnx among ${info.siblings.length} files); export it with optimum or pick an ONNX repository (e.g. Xenova/..., onnx-community/...)`,
    );
  }
  for (const sibling of siblings) await downloadFile(repo, info.sha, sibling, options);
  const repoDir = repoCacheDir(options.cacheDir, repo);
  if (!isCommitHash(revision)) {
    const ref = join(repoDir, 'refs', revision);
    await mkdir(dirname(ref), { recursive: true });
    await writeFile(ref, info.sha);
  }
  return join(repoDir, 'snapshots', info.sha);
}
