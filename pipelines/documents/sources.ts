import type { Dirent, Stats } from 'node:fs';
import { lstat, readdir, realpath, stat } from 'node:fs/promises';
import { join, relative, resolve, sep } from 'node:path';
import type { Readable } from 'node:stream';
import { createInterface } from 'node:readline';
import picomatch from 'picomatch';
import { z } from 'zod';
import type { S3Store } from '../../adapters/object-store/index.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { MAX_DOCUMENT_BYTES } from '../../adapters/protocol/limits.js';
import { readRegularFile } from '../../adapters/sources/checked-file.js';
import type { DocumentSource } from './document.js';
import { exactId, INEXACT_ID, recordProblem } from './record-hint.js';
import { s3Sources } from './s3-sources.js';

/**
 * Where documents come from: files and folders (walked recursively in a stable, sorted order,
 * filtered by --include/--exclude globs matched against the path relative to the folder given),
 * `s3://bucket/prefix` (listed recursively, see s3-sources.ts), or JSON Lines records on stdin,
 * `{"id","text"}` (inline text) or `{"id","path"}` (a file). Each source has a stable `uri`: the
 * absolute file path, the `s3://` URI of the object, or the record's id.
 */

export interface SelectOptions {
  /** Globs a file must match (any of them); none = every file. */
  include?: readonly string[];
  /** Globs that drop a file (any of them). */
  exclude?: readonly string[];
  /** Reads `s3://` paths (built on first use); without it they are refused. */
  s3?: () => S3Store;
  /** Largest document read (the parse stage's `maxBytes`): larger files and objects fail alone, unread. @default 100 MiB */
  maxBytes?: number;
  /**
   * Walk files and folders whose names start with a dot (`.git/`, `.env`): off, as most readers of
   * a folder do (a secret in `.env` must not become a searchable chunk). A dot path named on the
   * command line is always taken. @default false
   */
  hidden?: boolean;
  /**
   * Follow symbolic links met in a folder (to files and folders; each folder walked once, so a
   * loop ends). Off for remote callers (the gateway's `file://` folder refs), whose links could
   * lead out of the allowed roots. @default false
   */
  followLinks?: boolean;
  /** Absolute folders never walked into: the run's own index (`shoal ingest .`). @default none */
  skip?: readonly string[];
}

const DEFAULT_MAX_BYTES = MAX_DOCUMENT_BYTES;

/** A document to ingest, with its bytes read lazily (only when it is not already in the index). */
export interface PendingSource {
  uri: string;
  /** Reads the bytes (file) or encodes the text (record) and builds the parser's input. */
  load(): Promise<{ source: DocumentSource; bytes: Uint8Array }>;
}

/**
 * A local file, checked on the opened descriptor before it is read (adapters/sources/checked-file.ts):
 * a FIFO, socket or device would block or never end (`shoal ingest /dev/zero`), and a file over
 * the limit is refused without loading it; either fails this document alone, as the parser's own
 * checks do.
 */
function fileSource(path: string, uri: string, maxBytes: number, id?: string): PendingSource {
  return {
    uri,
    load: async () => {
      const bytes = await readRegularFile(path, { maxBytes, tooLarge: (size) => documentTooLarge(size, maxBytes) });
      return { source: { uri, path, bytes, ...(id === undefined ? {} : { id }) }, bytes };
    },
  };
}

function documentTooLarge(size: number, maxBytes: number): ShoalError {
  return new ShoalError(ErrorCode.DOCUMENT_TOO_LARGE, `the document has ${size} bytes, over the limit of ${maxBytes} bytes (maxBytes)`, {
    details: { limit: 'maxBytes', size, max: maxBytes },
  });
}

/** A file found in a folder, or a place that could not be read (a failure of its own in the run). */
interface Found {
  path: string;
  problem?: string;
}

interface Walk {
  hidden: boolean;
  followLinks: boolean;
  skip: ReadonlySet<string>;
  /** Real paths of the folders walked, so a linked folder is walked once and a loop ends. */
  visited: Set<string>;
}

/** A file-system error's code (`ENOENT`...), or '' for anything else. */
function fsCode(error: unknown): string {
  return error instanceof Error && 'code' in error ? String(error.code) : '';
}

function reason(error: unknown): string {
  const code = fsCode(error);
  if (code === 'EACCES' || code === 'EPERM') return 'permission denied';
  if (code === 'ELOOP') return 'a loop of symbolic links';
  if (code === 'ENOENT') return 'a broken symbolic link';
  return error instanceof Error ? error.message : String(error);
}

async function exists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    () => false,
  );
}

async function walk(dir: string, out: Found[], options: Walk): Promise<void> {
  const real = await realpath(dir).catch(() => dir);
  if (options.visited.has(real)) return;
  options.visited.add(real);
  let entries: Dirent[];
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (error) {
    // One unreadable folder fails as one source, not the whole run.
    out.push({ path: dir, problem: `cannot read the folder: ${reason(error)}` });
    return;
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const entry of entries) {
    if (!options.hidden && entry.name.startsWith('.')) continue;
    const path = join(dir, entry.name);
    if (options.skip.has(path)) continue;
    if (entry.name.includes('\uFFFD') && !(await exists(path))) {
      // Node decodes a name that is not UTF-8 with U+FFFD, and no file has that decoded name.
      out.push({ path, problem: 'the name is not valid UTF-8, so it cannot be opened by name here (rename it, e.g. convmv -f latin1 -t utf8)' });
      continue;
    }
    // A LanceDB table's folder (another index in the tree): its data and manifests are not documents.
    if (entry.isDirectory() && entry.name.endsWith('.lance')) continue;
    if (entry.isDirectory()) await walk(path, out, options);
    else if (entry.isFile()) out.push({ path });
    else if (entry.isSymbolicLink() && options.followLinks) {
      let target: Stats;
      try {
        target = await stat(path);
      } catch (error) {
        out.push({ path, problem: reason(error) });
        continue;
      }
      if (target.isDirectory()) {
        if (!options.skip.has(await realpath(path).catch(() => path))) await walk(path, out, options);
      } else if (target.isFile()) out.push({ path });
    }
  }
}

/** A place found unreadable: loading it fails with the reason, and the run goes on. */
function unreadable(found: Found): PendingSource {
  return {
    uri: found.path,
    load: () => Promise.reject(new ShoalError(ErrorCode.NOT_FOUND, `${found.path}: ${found.problem ?? 'cannot be read'}`)),
  };
}

/** Files under `paths` (files are taken as given, folders walked), filtered and de-duplicated. */
export async function fileSources(paths: readonly string[], options: SelectOptions = {}): Promise<PendingSource[]> {
  const include = options.include !== undefined && options.include.length > 0 ? picomatch([...options.include], { dot: true }) : null;
  const exclude = options.exclude !== undefined && options.exclude.length > 0 ? picomatch([...options.exclude], { dot: true }) : null;
  const seen = new Set<string>();
  const out: PendingSource[] = [];
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  const walking: Walk = { hidden: options.hidden ?? false, followLinks: options.followLinks ?? false, skip: new Set(options.skip ?? []), visited: new Set() };
  let s3: S3Store | null = null;
  for (const given of paths) {
    if (given.startsWith('s3://')) {
      if (options.s3 === undefined) throw new ShoalError(ErrorCode.CONFIG_INVALID, `${given}: S3 is not configured here`);
      s3 ??= options.s3();
      const keep = (relative: string): boolean => (include === null || include(relative)) && (exclude === null || !exclude(relative));
      for (const source of await s3Sources(given, { store: s3, maxBytes, keep })) {
        if (seen.has(source.uri)) continue;
        seen.add(source.uri);
        out.push(source);
      }
      continue;
    }
    const root = resolve(given);
    const info = await stat(root).catch((error: unknown) => {
      const code = fsCode(error);
      const what = code === 'ELOOP' ? 'a loop of symbolic links' : code === 'EACCES' ? 'permission denied' : 'no such file or folder';
      throw new ShoalError(ErrorCode.INVALID_INPUT, `${given}: ${what}`, { cause: error });
    });
    const found: Found[] = [];
    if (info.isDirectory()) await walk(root, found, walking);
    else found.push({ path: root });
    for (const entry of found) {
      const file = entry.path;
      const rel = info.isDirectory() ? relative(root, file).split(sep).join('/') : file.split(sep).pop() ?? file;
      // An unreadable folder is dropped only by an --exclude that covers what is in it.
      if (entry.problem === undefined && include !== null && !include(rel)) continue;
      if (exclude !== null && (exclude(rel) || (entry.problem !== undefined && exclude(`${rel}/x`)))) continue;
      if (seen.has(file)) continue;
      seen.add(file);
      out.push(entry.problem === undefined ? fileSource(file, file, maxBytes) : unreadable(entry));
    }
  }
  return out;
}

/**
 * A record's id: a string, or a whole number JSON can carry exactly. A larger number (a 64-bit
 * id written unquoted) was already rounded by JSON.parse, so two ids could become one: refused
 * with the advice to quote it.
 */
const RecordId = z
  .union([
    z.string().min(1).max(512),
    z
      .number()
      .finite()
      .refine(exactId, { message: INEXACT_ID }),
  ])
  .transform(String);
export const SourceRecord = z.union([
  z.strictObject({ id: RecordId, text: z.string().max(100 * 1024 * 1024) }),
  z.strictObject({ id: RecordId, path: z.string().min(1).max(4096) }),
]);

/** Reads every `{"id","text"}` / `{"id","path"}` line; a bad line fails the run with its line number. */
export async function recordSources(input: Readable, baseDir: string, maxBytes: number = DEFAULT_MAX_BYTES): Promise<PendingSource[]> {
  const out: PendingSource[] = [];
  const ids = new Set<string>();
  let lineNumber = 0;
  for await (const line of createInterface({ input, crlfDelay: Infinity })) {
    lineNumber += 1;
    if (line.trim() === '') continue;
    let value: unknown;
    try {
      // A byte order mark some editors put before the first line is not part of the JSON.
      value = JSON.parse(lineNumber === 1 ? line.replace(/^\uFEFF/, '') : line);
    } catch (error) {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `stdin line ${lineNumber}: not JSON`, { cause: error });
    }
    const parsed = SourceRecord.safeParse(value);
    if (!parsed.success) throw new ShoalError(ErrorCode.INVALID_INPUT, `stdin line ${lineNumber}: expected {"id","text"} or {"id","path"}: ${recordProblem(value)}`);
    const record = parsed.data;
    if (ids.has(record.id)) throw new ShoalError(ErrorCode.INVALID_INPUT, `stdin line ${lineNumber}: duplicate id ${JSON.stringify(record.id)}`);
    ids.add(record.id);
    if ('text' in record) {
      const { id, text } = record;
      out.push({
        uri: id,
        load: async () => {
          const bytes = new TextEncoder().encode(text);
          return { source: { uri: id, id, text }, bytes };
        },
      });
    } else {
      out.push(fileSource(resolve(baseDir, record.path), record.id, maxBytes, record.id));
    }
  }
  return out;
}
