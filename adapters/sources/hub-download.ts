import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open, readlink, rename, rm, stat, symlink } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { ErrorCode, ShoalError, toShoalError } from '../protocol/errors.js';
import { selectDownloadFiles, type Precision, type RepoFile } from './file-selection.js';
import { isCommitHash, refFile, repoCacheDir, snapshotDir } from './hf-cache.js';
import {
  DEFAULT_IDLE_TIMEOUT_MS,
  discardBody,
  fetchRepoInfo,
  hubGet,
  hubUrl,
  isTransient,
  networkError,
  transient,
  type HubConnection,
  type RepoSibling,
} from './hub-api.js';
import { ProgressReporter, type DownloadProgress } from './download-progress.js';
import { writeFileAtomically } from '../support/atomic-write.js';
import { makeDirectory } from '../support/directories.js';

export type { DownloadProgress } from './download-progress.js';
export { fetchRepoInfo } from './hub-api.js';

/**
 * Downloads a model repository from a Hugging Face compatible hub into the hub cache layout.
 * Each file goes to `blobs/<etag>.incomplete` first (resumed with a Range request after an
 * interruption, also across restarts and with Python's huggingface_hub, which uses the same
 * name), is checked against the size and sha256 (LFS) or git blob sha1 the hub lists, and only
 * then renamed into place and linked from `snapshots/<commit>/`: a crash never leaves a file that
 * looks complete but is not, and `refs/<branch>` is written only once every file is in place.
 */

export interface HubOptions extends HubConnection {
  cacheDir: string;
  precision?: Precision;
  /** Attempts per request (network errors, 5xx and corrupted transfers are retried, resuming partial files). @default 4 */
  attempts?: number;
  /** Wait before the 2nd attempt, doubled for each further one. @default 500 */
  retryDelayMs?: number;
  onProgress?: (event: DownloadProgress) => void;
}

const DEFAULT_ATTEMPTS = 4;
const DEFAULT_RETRY_DELAY_MS = 500;

/** A file to fetch, with what the hub's listing promises about it. */
interface PlannedFile {
  path: string;
  size: number | null;
  check: { kind: 'sha256' | 'git-sha1'; digest: string } | null;
  /** Name in blobs/ (the hub's etag: sha256 for LFS files, git blob sha1 otherwise), or null when unknown. */
  blob: string | null;
}

function planFile(sibling: RepoSibling): PlannedFile {
  const size = sibling.lfs?.size ?? sibling.size ?? null;
  if (sibling.lfs != null) return { path: sibling.rfilename, size, check: { kind: 'sha256', digest: sibling.lfs.sha256 }, blob: sibling.lfs.sha256 };
  if (sibling.blobId !== undefined) return { path: sibling.rfilename, size, check: { kind: 'git-sha1', digest: sibling.blobId }, blob: sibling.blobId };
  return { path: sibling.rfilename, size, check: null, blob: null };
}

/** Repository paths from the listing are untrusted: they must stay inside the snapshot folder. */
function isSafeRepoPath(path: string): boolean {
  return (
    path.length > 0 &&
    path.length <= 1024 &&
    !path.startsWith('/') &&
    !/[\\\0]/.test(path) &&
    !path.split('/').some((part) => part === '..' || part === '' || part === '.')
  );
}

async function fileSize(path: string): Promise<number | null> {
  try {
    return (await stat(path)).size;
  } catch {
    return null; // absent
  }
}

/** sha256 of the file, or the git blob sha1 (`blob <size>\0` + content) for non-LFS files. */
async function digestOf(path: string, kind: 'sha256' | 'git-sha1'): Promise<string> {
  const hash = createHash(kind === 'sha256' ? 'sha256' : 'sha1');
  if (kind === 'git-sha1') hash.update(`blob ${(await stat(path)).size}\0`);
  await pipeline(createReadStream(path), hash);
  return hash.digest('hex');
}

type Verdict = 'ok' | 'short' | 'corrupt';

/** 'short' = an interrupted transfer worth resuming; 'corrupt' = the partial file must be discarded. */
async function verdictOf(partial: string, file: PlannedFile): Promise<{ verdict: Verdict; why: string }> {
  const actual = (await fileSize(partial)) ?? 0;
  if (file.size !== null && actual < file.size) return { verdict: 'short', why: `transfer ended at ${actual} of ${file.size} bytes` };
  if (file.size !== null && actual > file.size) return { verdict: 'corrupt', why: `got ${actual} bytes, the hub lists ${file.size}` };
  if (file.check === null) return { verdict: 'ok', why: '' };
  const digest = await digestOf(partial, file.check.kind);
  if (digest === file.check.digest) return { verdict: 'ok', why: '' };
  return { verdict: 'corrupt', why: `${file.check.kind} ${digest} does not match the hub's ${file.check.digest}` };
}

interface FileJob {
  repo: string;
  url: string;
  partial: string;
  file: PlannedFile;
  options: HubOptions;
  progress: ProgressReporter;
}

function contentRangeStart(response: Response): number | null {
  const match = /^bytes (\d+)-/.exec(response.headers.get('content-range') ?? '');
  return match?.[1] === undefined ? null : Number(match[1]);
}

/** One transfer into the partial file: resumes from its current size when it can. */
async function transferOnce(job: FileJob): Promise<void> {
  const { file, partial, url, options } = job;
  const what = `download of ${job.repo}/${file.path}`;
  let have = (await fileSize(partial)) ?? 0;
  if (file.size !== null && have > file.size) {
    await rm(partial, { force: true }); // left over from another version of the file
    have = 0;
  }
  if (file.size !== null && have === file.size) return; // complete already; verification decides
  const request = await hubGet(options, url, what, have > 0 ? { range: `bytes=${have}-` } : {});
  const { response } = request;
  try {
    if (response.status === 416) {
      await rm(partial, { force: true });
      throw transient(new ShoalError(ErrorCode.DOWNLOAD_FAILED, `${what}: the hub refused to resume at byte ${have}; starting over`));
    }
    // A server that ignores Range answers 200 with the whole file: start over instead of appending.
    const resume = have > 0 && response.status === 206;
    if (resume && contentRangeStart(response) !== have) {
      await rm(partial, { force: true });
      throw transient(new ShoalError(ErrorCode.DOWNLOAD_FAILED, `${what}: the hub resumed at the wrong offset (${response.headers.get('content-range')})`));
    }
    if (!resume && response.status === 206) {
      throw new ShoalError(ErrorCode.DOWNLOAD_FAILED, `${what}: the hub sent a partial answer (206) to a request for the whole file`);
    }
    await writeBody(job, request.response, resume ? have : 0, () => request.touch(), () => request.timedOut());
  } finally {
    request.close();
    await discardBody(response); // after a refused resume; a no-op once the body was read
  }
}

/** The body's chunks; a failure while reading them (reset, abort, idle timeout) is a transient network error. */
async function* bodyChunks(job: FileJob, body: AsyncIterable<Uint8Array>, timedOut: () => boolean): AsyncGenerator<Uint8Array> {
  try {
    for await (const chunk of body) yield chunk;
  } catch (error) {
    throw networkError(`download of ${job.repo}/${job.file.path}`, job.url, error, timedOut(), job.options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS);
  }
}

/** How far the disk may fall behind the network before reading waits for it. */
const MAX_WRITE_BEHIND_BYTES = 8 * 1024 * 1024;

/**
 * Streams the body into the partial file, keeping every byte that arrived for a resume. The body is
 * read as fast as it comes and written behind (up to MAX_WRITE_BEHIND_BYTES): a dropped connection
 * errors the body stream, and an erroring stream throws away the chunks it still holds, so a
 * reader that waited on the disk between reads lost bytes that had arrived (on Node 24 a cut after
 * 123,456 bytes kept none of them). Every queued write is awaited before the outcome is known.
 */
async function writeBody(job: FileJob, response: Response, start: number, touch: () => void, timedOut: () => boolean): Promise<void> {
  // Opened while the body is already being read: even the wait for the file must not leave the
  // first chunks in the stream's queue.
  const opening = localFs(job, () => open(job.partial, start > 0 ? 'a' : 'w'));
  opening.catch(() => undefined);
  let received = start;
  let behind = 0;
  let writes: Promise<void> = opening.then(() => undefined);
  job.progress.fileStarted(job.file.path, received);
  try {
    if (response.body === null) return;
    try {
      for await (const chunk of bodyChunks(job, response.body, timedOut)) {
        touch();
        // The listing's size bounds the transfer: a hub (or a mirror) that sends more would fill the disk.
        if (job.file.size !== null && received + chunk.byteLength > job.file.size) {
          throw transient(new ShoalError(ErrorCode.DOWNLOAD_FAILED, `download of ${job.repo}/${job.file.path}: the hub sent more than the ${job.file.size} bytes it lists; stopped there`));
        }
        received += chunk.byteLength;
        behind += chunk.byteLength;
        const upTo = received;
        writes = writes.then(async () => {
          const handle = await opening;
          await localFs(job, () => handle.write(chunk));
          behind -= chunk.byteLength;
          job.progress.fileReceived(upTo);
        });
        // Handled here so a failed write is not an unhandled rejection while reading goes on; it is
        // thrown by the next wait below.
        writes.catch(() => undefined);
        if (behind > MAX_WRITE_BEHIND_BYTES) await writes;
      }
    } finally {
      await writes;
    }
  } finally {
    await (await opening).close();
  }
}

/** Local disk failures (full, read-only, permissions) are not retried: another attempt would fail the same way. */
async function localFs<T>(job: FileJob, operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (error) {
    throw new ShoalError(ErrorCode.DOWNLOAD_FAILED, `cannot write ${job.partial} for ${job.repo}/${job.file.path}: ${String(error)}`, { cause: error });
  }
}

function attemptsOf(options: HubOptions): number {
  return Math.max(1, options.attempts ?? DEFAULT_ATTEMPTS);
}

/** Waits before attempt `attempt` (2, 3...): the base delay, doubled each time. */
async function backoff(options: HubOptions, attempt: number): Promise<void> {
  const base = options.retryDelayMs ?? DEFAULT_RETRY_DELAY_MS;
  if (attempt > 1 && base > 0) await delay(base * 2 ** (attempt - 2));
}

/** Failures that mean the hub cannot be reached at all (no network, no DNS, a firewall), not a bad request. */
const UNREACHABLE = /ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ENETUNREACH|EHOSTUNREACH/;

/** The last failure of a request that was tried `attempts` times, saying so (and what to do when the hub is out of reach). */
function exhausted(last: ShoalError, attempts: number): ShoalError {
  const hint = UNREACHABLE.test(last.message)
    ? '; the hub cannot be reached from this machine: put the model folder in a models directory (SHOAL_MODEL_DIR, org/name/ inside; see docs/models.md) or set HF_ENDPOINT to a mirror'
    : '';
  return new ShoalError(last.code, `${last.message} (after ${attempts} attempt${attempts === 1 ? '' : 's'})${hint}`, {
    cause: last,
    ...(last.details === undefined ? {} : { details: last.details }),
  });
}

/** Runs a request again after transient failures, up to the configured attempts. */
async function withRetries<T>(options: HubOptions, run: () => Promise<T>): Promise<T> {
  const attempts = attemptsOf(options);
  for (let attempt = 1; ; attempt++) {
    await backoff(options, attempt);
    try {
      return await run();
    } catch (error) {
      if (!isTransient(error)) throw error;
      if (attempt >= attempts) throw exhausted(toShoalError(error), attempts);
    }
  }
}

/** Fetches one file into `partial` until it verifies, retrying transient failures. */
async function fetchVerified(job: FileJob): Promise<void> {
  const attempts = attemptsOf(job.options);
  let lastError: ShoalError | null = null;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    await backoff(job.options, attempt);
    try {
      await transferOnce(job);
    } catch (error) {
      if (!isTransient(error)) throw toShoalError(error, ErrorCode.DOWNLOAD_FAILED);
      lastError = toShoalError(error);
      continue;
    }
    const { verdict, why } = await verdictOf(job.partial, job.file);
    if (verdict === 'ok') return;
    // A corrupt file must not be resumed, and must not stay behind for someone to trust.
    if (verdict === 'corrupt') await rm(job.partial, { force: true });
    lastError = new ShoalError(ErrorCode.DOWNLOAD_FAILED, `download of ${job.repo}/${job.file.path}: ${why}`);
  }
  throw exhausted(lastError ?? new ShoalError(ErrorCode.DOWNLOAD_FAILED, `download of ${job.repo}/${job.file.path} failed`), attempts);
}

/** Points `snapshots/<commit>/<file>` at its blob with a relative link, replacing any old one atomically. */
async function linkIntoSnapshot(blobPath: string, snapshotPath: string): Promise<void> {
  const target = relative(dirname(snapshotPath), blobPath);
  try {
    if ((await readlink(snapshotPath)) === target) return;
  } catch {
    // not a link yet: create it below
  }
  const temp = `${snapshotPath}.${process.pid}.link`;
  await rm(temp, { force: true });
  await symlink(target, temp);
  await rename(temp, snapshotPath);
}

async function ensureFile(repo: string, commit: string, file: PlannedFile, options: HubOptions, progress: ProgressReporter): Promise<void> {
  const repoDir = repoCacheDir(options.cacheDir, repo);
  const snapshotPath = join(snapshotDir(options.cacheDir, repo, commit), file.path);
  const target = file.blob === null ? snapshotPath : join(repoDir, 'blobs', file.blob);
  const present = (await fileSize(target)) !== null;
  if (!present) {
    await makeDirectory(dirname(target));
    const partial = `${target}.incomplete`;
    const url = hubUrl(options, `${repo}/resolve/${commit}/${file.path.split('/').map(encodeURIComponent).join('/')}`);
    await fetchVerified({ repo, url, partial, file, options, progress });
    await rename(partial, target);
  }
  if (file.blob !== null) {
    await makeDirectory(dirname(snapshotPath));
    await linkIntoSnapshot(target, snapshotPath);
  }
  const size = (await fileSize(target)) ?? 0;
  if (present) progress.fileCached(file.path, size);
  else progress.fileDone(file.path, size);
}

async function download(repo: string, revision: string, options: HubOptions): Promise<string> {
  const info = await withRetries(options, () => fetchRepoInfo(repo, revision, options));
  const siblings = info.siblings.filter((s) => isSafeRepoPath(s.rfilename));
  const listed: RepoFile[] = siblings.map((s) => ({ path: s.rfilename, size: s.lfs?.size ?? s.size }));
  const bySibling = new Map(siblings.map((s) => [s.rfilename, s]));
  const files = selectDownloadFiles(listed, options.precision ?? 'fp32')
    .map((path) => bySibling.get(path))
    .filter((s): s is RepoSibling => s !== undefined)
    .map(planFile);
  if (!files.some((f) => f.path.toLowerCase().endsWith('.onnx'))) {
    const weights = siblings.map((s) => s.rfilename).filter((p) => /\.(safetensors|bin|pt|pth|h5|gguf)$/i.test(p));
    throw new ShoalError(
      ErrorCode.MODEL_NOT_FOUND,
      `${repo}@${revision} has no ONNX graph (no *.onnx among its ${info.siblings.length} files${weights.length > 0 ? `; it has ${weights.slice(0, 4).join(', ')}` : ''}); ` +
        'export it with `optimum-cli export onnx` into a models directory, or pick an ONNX repository (e.g. Xenova/..., onnx-community/...)',
      { details: { repo, revision } },
    );
  }
  const progress = new ProgressReporter(repo, revision, files, options.onProgress);
  for (const file of files) await ensureFile(repo, info.sha, file, options, progress);
  // The ref is written last: until then the cache does not claim this revision exists.
  if (!isCommitHash(revision)) await writeFileAtomically(refFile(options.cacheDir, repo, revision), [Buffer.from(info.sha)]);
  return snapshotDir(options.cacheDir, repo, info.sha);
}

/**
 * One download per cache folder, repository, revision and precision at a time in this process:
 * two names for the same model (a catalog name and its hub id) resolved together must not write
 * the same partial file. The map is process-wide on purpose, like the cache folder it guards.
 */
const inflight = new Map<string, Promise<string>>();

/**
 * Makes `repo@revision` available in the cache and returns its snapshot folder. Only the files
 * Shoal needs are fetched (see file-selection.ts); files already in the cache are kept. A caller
 * joining a download already under way gets its result but not its progress events.
 */
export function downloadModel(repo: string, revision: string, options: HubOptions): Promise<string> {
  const key = JSON.stringify([options.cacheDir, options.endpoint, repo, revision, options.precision ?? 'fp32']);
  const running = inflight.get(key);
  if (running !== undefined) return running;
  const started = download(repo, revision, options)
    .catch((error: unknown) => {
      if (error instanceof ShoalError) throw error;
      // Anything else comes from the cache folder itself (permissions, a full or read-only disk).
      throw new ShoalError(ErrorCode.DOWNLOAD_FAILED, `cannot store ${repo} in the hub cache ${options.cacheDir}: ${String(error)}`, { cause: error });
    })
    .finally(() => inflight.delete(key));
  inflight.set(key, started);
  return started;
}
