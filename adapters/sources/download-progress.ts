/**
 * Progress of a model download, shaped for a progress bar per file and one for the repository.
 * Per file the listener sees a start event (receivedBytes = the offset a resumed transfer starts
 * from), data events at most every 1% (and at least 256 KiB apart), and exactly one `done` event,
 * also for files the cache already held (`cached: true`). receivedBytes only goes down when a hub
 * ignores a resume request and the file starts over from zero.
 */

export interface DownloadProgress {
  repo: string;
  revision: string;
  /** Path inside the repository. */
  file: string;
  /** 1-based position of `file` among the `fileCount` files this download needs. */
  fileIndex: number;
  fileCount: number;
  receivedBytes: number;
  /** Size the hub lists for the file, or null when it lists none. */
  totalBytes: number | null;
  done: boolean;
  /** The file was already in the cache: nothing was fetched. */
  cached: boolean;
  /** Bytes of all files of the download so far (finished files plus the current one). */
  repoReceivedBytes: number;
  /** Sum of the listed sizes, or null when one of them is unknown. */
  repoTotalBytes: number | null;
}

export type ProgressListener = (event: DownloadProgress) => void;

/** Events closer together than this are merged (a 16 KiB chunk per event would flood a terminal). */
const MIN_STEP_BYTES = 256 * 1024;
const UNKNOWN_SIZE_STEP_BYTES = 1024 * 1024;
const STEPS_PER_FILE = 100;

interface ListedFile {
  path: string;
  size: number | null;
}

export class ProgressReporter {
  readonly #repo: string;
  readonly #revision: string;
  readonly #index: ReadonlyMap<string, number>;
  readonly #sizes: ReadonlyMap<string, number | null>;
  readonly #repoTotal: number | null;
  readonly #listener: ProgressListener | undefined;
  #finishedBytes = 0;
  #file = '';
  #received = 0;
  #lastReported = 0;

  constructor(repo: string, revision: string, files: readonly ListedFile[], listener: ProgressListener | undefined) {
    this.#repo = repo;
    this.#revision = revision;
    this.#index = new Map(files.map((f, i) => [f.path, i + 1]));
    this.#sizes = new Map(files.map((f) => [f.path, f.size]));
    this.#repoTotal = files.every((f) => f.size !== null) ? files.reduce((sum, f) => sum + (f.size ?? 0), 0) : null;
    this.#listener = listener;
  }

  #total(): number | null {
    return this.#sizes.get(this.#file) ?? null;
  }

  #step(): number {
    const total = this.#total();
    return total === null ? UNKNOWN_SIZE_STEP_BYTES : Math.max(MIN_STEP_BYTES, Math.ceil(total / STEPS_PER_FILE));
  }

  #emit(done: boolean, cached: boolean): void {
    if (this.#listener === undefined) return;
    this.#lastReported = this.#received;
    this.#listener({
      repo: this.#repo,
      revision: this.#revision,
      file: this.#file,
      fileIndex: this.#index.get(this.#file) ?? 0,
      fileCount: this.#index.size,
      receivedBytes: this.#received,
      totalBytes: this.#total(),
      done,
      cached,
      repoReceivedBytes: this.#finishedBytes + (done ? 0 : this.#received),
      repoTotalBytes: this.#repoTotal,
    });
  }

  /** A transfer of `file` begins, `received` bytes in (non-zero when resuming). */
  fileStarted(file: string, received: number): void {
    this.#file = file;
    this.#received = received;
    this.#emit(false, false);
  }

  fileReceived(received: number): void {
    this.#received = received;
    if (received - this.#lastReported >= this.#step() || received === this.#total()) this.#emit(false, false);
  }

  fileDone(file: string, size: number): void {
    this.#finish(file, size, false);
  }

  fileCached(file: string, size: number): void {
    this.#finish(file, size, true);
  }

  #finish(file: string, size: number, cached: boolean): void {
    this.#file = file;
    this.#received = size;
    this.#finishedBytes += size;
    this.#emit(true, cached);
  }
}
