import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { filterPredicate, parseFilter } from '../shared/filter-tree.js';
import type { ChunkRow, DocumentState, MultivectorSearchOptions, SearchHit, SearchOptions, Store, SparseValues, TableSpec, QueryVector } from '../store.js';
import { noMultivector, refuseMultivector } from '../shared/multivector.js';
import { checkSparseQuery, rankSparse } from '../shared/sparse.js';
import { checkQuery, checkRowTypes, checkTableName, existsMatching, freezeSpec, keptOptional, rankTyped, StateShape, StoredSpec, storedSpecOf, toHitRow } from '../shared/table-spec.js';
import { writeFileAtomically } from '../../support/atomic-write.js';
import { makeDirectory } from '../../support/directories.js';

/**
 * `file:///dir`: JSON Lines files, for inspection, tests and small corpora. Folder `DIR/TABLE/`
 * holds `_spec.json` and one file per source (named by the hash of the source): its state on
 * the first line, then its rows. Every file is written to a temp name and renamed, so a reader
 * (or a crash) sees the old file or the new one, never half of one; rows and state of a source
 * change together. Search is a brute-force scan, exact, scored like LanceDB. One writer at a time.
 */

const SourceFile = z.object({
  state: StateShape.nullable(),
  rows: z.array(z.record(z.string(), z.unknown())),
});

type StoredRow = Omit<ChunkRow, 'vector'> & { vector: number[] };

export interface JsonlStoreOptions {
  dir: string;
  /** @default 'chunks' */
  table?: string;
}

const StoredRowShape = z.object({
  vector: z.array(z.number()),
  sparse: z.strictObject({ indices: z.array(z.number()), values: z.array(z.number()), dimension: z.number() }).nullable().optional(),
}).passthrough();

/**
 * Characters of JSON Lines per write. A source's file goes out in pieces of about this size, not
 * as one string of all its lines: a 50,000-chunk document made a string of ~12 MB and a Buffer of
 * as much again, both outside the young generation, so a big commit cost more than its share. Under
 * 64 KiB even in two-byte characters, so a piece is an ordinary young object.
 */
const WRITE_PIECE_CHARS = 1 << 15;

/** A source's file, state line first and then one line per row, as UTF-8 pieces of about WRITE_PIECE_CHARS characters (the same bytes as one joined string). */
function* fileContent(file: { state: DocumentState | null; rows: readonly StoredRow[] }): Generator<Uint8Array> {
  let piece = `${JSON.stringify(file.state)}\n`;
  for (const row of file.rows) {
    if (piece.length >= WRITE_PIECE_CHARS) {
      yield Buffer.from(piece);
      piece = '';
    }
    piece += `${JSON.stringify(row)}\n`;
  }
  yield Buffer.from(piece);
}

export class JsonlStore implements Store {
  readonly #folder: string;
  readonly #where: string;
  #spec: TableSpec | null = null;
  /** source → its file's content, loaded once and kept in step with every commit. */
  #files: Map<string, { state: DocumentState | null; rows: StoredRow[] }> | null = null;

  constructor(options: JsonlStoreOptions) {
    const table = checkTableName(options.table ?? 'chunks');
    this.#folder = join(options.dir, table);
    this.#where = `table ${table} in file://${options.dir}`;
  }

  /** A file on the index's path (a mistyped --index) is the caller's mistake, not an INTERNAL ENOTDIR. */
  async #ensureFolder(): Promise<void> {
    await makeDirectory(this.#folder).catch((error: unknown) => {
      throw new ShoalError(ErrorCode.CONFIG_INVALID, `cannot create the folder of ${this.#where} (${this.#folder}): is a part of the path a file?`, { cause: error });
    });
  }

  #fileOf(source: string): string {
    return join(this.#folder, `${createHash('sha256').update(source).digest('hex').slice(0, 40)}.jsonl`);
  }

  async #load(): Promise<Map<string, { state: DocumentState | null; rows: StoredRow[] }>> {
    if (this.#files !== null) return this.#files;
    const files = new Map<string, { state: DocumentState | null; rows: StoredRow[] }>();
    const names = existsSync(this.#folder) ? (await readdir(this.#folder)).filter((name) => name.endsWith('.jsonl')) : [];
    for (const name of names) {
      const lines = (await readFile(join(this.#folder, name), 'utf8')).split('\n').filter((line) => line !== '');
      const parsed = SourceFile.parse({ state: JSON.parse(lines[0] ?? 'null'), rows: lines.slice(1).map((line) => JSON.parse(line)) });
      const rows = parsed.rows.map((raw): StoredRow => {
        const { vector, sparse } = StoredRowShape.parse(raw);
        return { ...toHitRow(raw), vector, ...(sparse == null ? {} : { sparse }) };
      });
      const source = parsed.state?.source ?? rows[0]?.source;
      if (source !== undefined) files.set(source, { state: parsed.state, rows });
    }
    this.#files = files;
    return files;
  }

  async describe(): Promise<TableSpec | null> {
    if (this.#spec !== null) return this.#spec;
    const path = join(this.#folder, '_spec.json');
    if (!existsSync(path)) return null;
    const parsed = StoredSpec.safeParse(JSON.parse(await readFile(path, 'utf8')));
    if (!parsed.success) throw new ShoalError(ErrorCode.CONFIG_INVALID, `${this.#where} was not written by shoal ingest`);
    this.#spec = freezeSpec(parsed.data);
    return this.#spec;
  }

  async prepare(spec: TableSpec): Promise<void> {
    refuseMultivector(spec, 'JSON Lines', this.#where);
    if (await existsMatching(() => this.describe(), spec, this.#where)) return;
    await this.#ensureFolder();
    await writeFileAtomically(join(this.#folder, '_spec.json'), `${JSON.stringify(storedSpecOf(spec))}\n`);
    this.#spec = freezeSpec(spec);
  }

  async states(sources: readonly string[]): Promise<Map<string, DocumentState>> {
    const files = await this.#load();
    const out = new Map<string, DocumentState>();
    for (const source of sources) {
      const state = files.get(source)?.state;
      if (state != null) out.set(source, state);
    }
    return out;
  }

  async commit(rows: readonly ChunkRow[], states: readonly DocumentState[]): Promise<void> {
    if (states.length === 0) return;
    const spec = await this.describe();
    if (rows.length > 0 && spec === null) throw new ShoalError(ErrorCode.INTERNAL, `${this.#where} must be prepared before rows are written`);
    checkRowTypes(rows, spec);
    const files = await this.#load();
    await this.#ensureFolder();
    const bySource = new Map<string, ChunkRow[]>();
    // Appended in place: copying a source's list for each of its rows made a 100,000-chunk document quadratic.
    for (const row of rows) {
      const list = bySource.get(row.source);
      if (list === undefined) bySource.set(row.source, [row]);
      else list.push(row);
    }
    const stateOf = new Map(states.map((state) => [state.source, state]));
    for (const source of new Set([...stateOf.keys(), ...bySource.keys()])) {
      const state = stateOf.get(source) ?? files.get(source)?.state ?? null;
      const incoming = (bySource.get(source) ?? []).map((row): StoredRow => {
        const { sparse, ...rest } = row;
        return { ...rest, ...keptOptional(row, spec?.optionalColumns ?? []), vector: Array.from(row.vector, Math.fround), ...(sparse == null ? {} : { sparse }) };
      });
      const previous = files.get(source)?.rows ?? [];
      // Kept: rows of the same content and settings not rewritten now; older versions go. A new
      // source has none, and then no set of the incoming ids is built (one entry per chunk).
      const ids = previous.length === 0 ? null : new Set(incoming.map((row) => row.id));
      const kept = ids === null ? [] : previous.filter((row) => !ids.has(row.id) && (state === null || (row.document_id === state.document_id && row.settings === state.settings)));
      const next = { state, rows: [...kept, ...incoming] };
      await writeFileAtomically(this.#fileOf(source), fileContent(next));
      files.set(source, next);
    }
  }

  async statesUnder(prefix: string): Promise<DocumentState[]> {
    const files = await this.#load();
    return [...files.values()].flatMap((file) => (file.state !== null && file.state.source.startsWith(prefix) ? [file.state] : []));
  }

  async remove(sources: readonly string[]): Promise<void> {
    const files = await this.#load();
    for (const source of sources) {
      // One file holds a source's state and rows, so both go at once.
      await rm(this.#fileOf(source), { force: true });
      files.delete(source);
    }
  }

  async #rows(filter: string | undefined): Promise<StoredRow[]> {
    const files = await this.#load();
    const all = [...files.values()].flatMap((file) => file.rows);
    if (filter === undefined) return all;
    return all.filter(filterPredicate(parseFilter(filter)));
  }

  async count(filter?: string): Promise<number> {
    if ((await this.describe()) === null) return 0;
    return (await this.#rows(filter)).length;
  }

  async search(query: QueryVector, options: SearchOptions): Promise<SearchHit[]> {
    // The numbers this backend's client and scoring take: the store is the query vector's wire edge.
    const vector: readonly number[] = Array.isArray(query) ? query : Array.from(query);
    const spec = await this.describe();
    if (spec === null) throw new ShoalError(ErrorCode.NOT_FOUND, `no ${this.#where} (run shoal ingest first)`);
    checkQuery(vector, spec, options.k);
    const candidates = (await this.#rows(options.filter)).map((row) => ({ row, vector: row.vector }));
    return rankTyped(spec, vector, candidates, options.k).map(({ row, score }) => ({ row: toHitRow(row), score }));
  }

  async searchMultivector(_query: readonly (readonly number[])[], _options: MultivectorSearchOptions): Promise<SearchHit[]> {
    throw noMultivector('JSON Lines', this.#where);
  }

  /** An exact scan over the rows' stored sparse vectors. */
  async searchSparse(query: SparseValues, options: SearchOptions): Promise<SearchHit[]> {
    if ((await this.describe()) === null) throw new ShoalError(ErrorCode.NOT_FOUND, `no ${this.#where} (run shoal ingest first)`);
    checkSparseQuery(query, options.k);
    const candidates = (await this.#rows(options.filter)).map((row) => ({ row, sparse: row.sparse }));
    return rankSparse(query, candidates, options.k).map(({ row, score }) => ({ row: toHitRow(row), score }));
  }

  async optimize(): Promise<void> {
    // A scan needs no index.
  }

  async close(): Promise<void> {
    this.#files = null;
  }
}
