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
import { checkMetadata, type DocumentMetadata } from '../../adapters/protocol/metadata.js';
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
  /** Metadata given with the source (a record's), known before it is read: a document-job producer publishes it with the job. */
  metadata?: DocumentMetadata;
  /** Reads the bytes (file) or encodes the text (record) and builds the parser's input. */
  load(): Promise<{ source: DocumentSource; bytes: Uint8Array }>;
}

/**
 * A local file, checked on the opened descriptor before it is read (adapters/sources/checked-file.ts):
 * a FIFO, socket or device would block or never end (`shoal ingest /dev/zero`), and a file over
 * the limit is refused without loading it; either fails this document alone, as the parser's own
 * checks do.
 */
function fileSource(path: string, uri: string, maxBytes: number, id?: string, metadata?: DocumentMetadata): PendingSource {
  return {
    uri,
    ...(metadata === undefined ? {} : { metadata }),
    load: async () => {
      const bytes = await readRegularFile(path, { maxBytes, tooLarge: (size) => documentTooLarge(size, maxBytes) });
      // The file's own mtime, for the automatic metadata (document-metadata.ts); a file gone since is read-failed above.
      const modified = await stat(path).then((info) => info.mtime.toISOString(), () => undefined);
      return { source: { uri, path, bytes, ...(id === undefined ? {} : { id }), ...(metadata === undefined ? {} : { metadata }), ...(modified === undefined ? {} : { modified }) }, bytes };
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

/** A table folder of a `file://` index: `_spec.json` and one `<40 hex>.jsonl` file per source (adapters/stores/file/store.ts). */
const FILE_INDEX_ENTRY = /^[0-9a-f]{40}\.jsonl$/;

function isFileIndexTable(entries: readonly Dirent[]): boolean {
  return entries.some((entry) => entry.isFile() && entry.name === '_spec.json') && entries.every((entry) => entry.name === '_spec.json' || (entry.isFile() && FILE_INDEX_ENTRY.test(entry.name)));
}

async function walk(dir: string, out: Found[], options: Walk): Promise<void> {
  const real = await realpath(dir).catch(() => dir);
  // The run's own index reached through another name (a link to it, or a link it is under).
  if (options.visited.has(real) || options.skip.has(real)) return;
  options.visited.add(real);
  let entries: Dirent[];
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (error) {
    // One unreadable folder fails as one source, not the whole run.
    out.push({ path: dir, problem: `cannot read the folder: ${reason(error)}` });
    return;
  }
  // Another index in the tree is not documents: a file:// index's table folder, and a LanceDB
  // database's tables (`*.lance`) and its `__manifest` folder (transactions, versions).
  if (isFileIndexTable(entries)) return;
  const lanceDatabase = entries.some((entry) => entry.isDirectory() && entry.name.endsWith('.lance'));
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
    if (entry.isDirectory() && (entry.name.endsWith('.lance') || (lanceDatabase && entry.name === '__manifest'))) continue;
    if (entry.isDirectory()) await walk(path, out, options);
    else if (entry.isFile()) out.push({ path });
    // A FIFO, socket or device fails alone when read (READ_FAILED, checked-file.ts), as when named
    // on the command line; skipped in silence, it went missing from the run's counts.
    else if (!entry.isSymbolicLink()) out.push({ path });
    else if (options.followLinks) {
      let target: Stats;
      try {
        target = await stat(path);
      } catch (error) {
        out.push({ path, problem: reason(error) });
        continue;
      }
      if (target.isDirectory()) await walk(path, out, options);
      else out.push({ path });
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
  // The folders skipped, as given and as their real paths: an index named through a link is still the index.
  const skip = new Set(options.skip ?? []);
  for (const path of options.skip ?? []) skip.add(await realpath(path).catch(() => path));
  const walking: Walk = { hidden: options.hidden ?? false, followLinks: options.followLinks ?? false, skip, visited: new Set() };
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
/** A record's `metadata`: any object here, checked with its line number by checkMetadata (adapters/protocol/metadata.ts). */
const RecordMetadata = z.record(z.string(), z.unknown()).optional();
export const SourceRecord = z.union([
  z.strictObject({ id: RecordId, text: z.string().max(100 * 1024 * 1024), metadata: RecordMetadata }),
  z.strictObject({ id: RecordId, path: z.string().min(1).max(4096), metadata: RecordMetadata }),
]);
export type SourceRecord = z.output<typeof SourceRecord>;

/** A record line refused by `--on-error skip`: its number (from 1), why, and the line as read. */
export interface RejectedRecord {
  line: number;
  code: string;
  reason: string;
  /** The line itself, cut at REJECTED_INPUT_CHARS (a record can hold 100 MiB of text). */
  input: string;
  truncated: boolean;
}

export interface RecordReadOptions {
  /**
   * Top-level fields of each record moved into its metadata (`--metadata-fields title,year`);
   * other fields beside id, text/path and metadata are still refused, so a typo stays loud.
   */
  metadataFields?: readonly string[];
  /**
   * Called for each bad line (not JSON, neither shape, an id already read), which is then left
   * out; without it the first bad line fails the whole read (INVALID_INPUT with its line number).
   */
  onReject?: (rejected: RejectedRecord) => Promise<void> | void;
}

export const REJECTED_INPUT_CHARS = 10_000;

/** Reads every `{"id","text"}` / `{"id","path"}` line; a bad line fails the read with its line number, or is handed to onReject. */
export async function recordSources(input: Readable, baseDir: string, maxBytes: number = DEFAULT_MAX_BYTES, options: RecordReadOptions = {}): Promise<PendingSource[]> {
  const out: PendingSource[] = [];
  const ids = new Set<string>();
  let lineNumber = 0;
  for await (const line of createInterface({ input, crlfDelay: Infinity })) {
    lineNumber += 1;
    if (line.trim() === '') continue;
    const record = readRecord(line, lineNumber, ids, options.metadataFields ?? []);
    if (record instanceof ShoalError) {
      if (options.onReject === undefined) throw record;
      await options.onReject({ line: lineNumber, code: record.code, reason: record.message, input: line.slice(0, REJECTED_INPUT_CHARS), truncated: line.length > REJECTED_INPUT_CHARS });
      continue;
    }
    ids.add(record.id);
    out.push(recordSource(record, baseDir, maxBytes));
  }
  return out;
}

/** One line → a record, or the error that refuses it (returned, so a caller can skip it). */
function readRecord(line: string, lineNumber: number, ids: ReadonlySet<string>, metadataFields: readonly string[]): SourceRecord | ShoalError {
  let value: unknown;
  try {
    // A byte order mark some editors put before the first line is not part of the JSON.
    value = JSON.parse(lineNumber === 1 ? line.replace(/^\uFEFF/, '') : line);
  } catch (error) {
    return new ShoalError(ErrorCode.INVALID_INPUT, `stdin line ${lineNumber}: not JSON`, { cause: error });
  }
  const lifted = liftMetadataFields(value, metadataFields, `stdin line ${lineNumber}`);
  if (lifted instanceof ShoalError) return lifted;
  const parsed = SourceRecord.safeParse(lifted);
  if (!parsed.success) return new ShoalError(ErrorCode.INVALID_INPUT, `stdin line ${lineNumber}: expected {"id","text"} or {"id","path"}: ${recordProblem(lifted, line)}`);
  if (ids.has(parsed.data.id)) return new ShoalError(ErrorCode.INVALID_INPUT, `stdin line ${lineNumber}: duplicate id ${JSON.stringify(parsed.data.id)}`);
  try {
    if (parsed.data.metadata !== undefined) checkMetadata(parsed.data.metadata, `stdin line ${lineNumber}`);
  } catch (error) {
    return error instanceof ShoalError ? error : new ShoalError(ErrorCode.INVALID_INPUT, `stdin line ${lineNumber}: invalid metadata`);
  }
  return parsed.data;
}

/**
 * The record with `fields` moved from its top level into its `metadata` (absent fields are
 * skipped); a field both lifted and already in `metadata` is refused rather than one silently
 * winning.
 */
export function liftMetadataFields(value: unknown, fields: readonly string[], where: string): unknown {
  if (fields.length === 0 || typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const record: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  const given = record.metadata;
  if (given !== undefined && (typeof given !== 'object' || given === null || Array.isArray(given))) return value;
  const metadata: Record<string, unknown> = { ...(given as Record<string, unknown> | undefined) };
  let moved = false;
  for (const field of fields) {
    if (!Object.hasOwn(record, field)) continue;
    if (Object.hasOwn(metadata, field)) return new ShoalError(ErrorCode.INVALID_INPUT, `${where}: "${field}" is both a field lifted by --metadata-fields and a key of "metadata"; keep one`);
    metadata[field] = record[field];
    delete record[field];
    moved = true;
  }
  return moved ? { ...record, metadata } : value;
}

/**
 * Appends record sources to the file sources. A record's id is its source, as a file's path is:
 * the same name twice would share (and lose) its rows, so a clash is refused. One at a time: a
 * spread of 200,000 records overflows the call stack.
 */
export function addRecordSources(out: PendingSource[], records: readonly PendingSource[], what = { record: 'record id', file: 'given to ingest' }): void {
  const filePaths = new Set(out.map((source) => source.uri));
  const clash = records.find((record) => filePaths.has(record.uri));
  if (clash !== undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, `${what.record} ${JSON.stringify(clash.uri)} is also a file ${what.file}: a record's id is its source in the index, so give it another id`);
  for (const record of records) out.push(record);
}

/**
 * One validated record as a source: inline text, or a file (`path` relative to `baseDir`) named
 * by the record's id. The library's `ingest({records})` builds its sources with this too.
 */
export function recordSource(record: SourceRecord, baseDir: string, maxBytes: number = DEFAULT_MAX_BYTES): PendingSource {
  const metadata = record.metadata === undefined ? undefined : checkMetadata(record.metadata, `record ${JSON.stringify(record.id)}`);
  if ('text' in record) {
    const { id, text } = record;
    return {
      uri: id,
      ...(metadata === undefined ? {} : { metadata }),
      load: async () => {
        const bytes = new TextEncoder().encode(text);
        return { source: { uri: id, id, text, ...(metadata === undefined ? {} : { metadata }) }, bytes };
      },
    };
  }
  return fileSource(resolve(baseDir, record.path), record.id, maxBytes, record.id, metadata);
}
