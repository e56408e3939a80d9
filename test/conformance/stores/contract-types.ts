import { expect, it } from 'vitest';
import { ErrorCode } from '../../../adapters/protocol/errors.js';
import { EmbeddingDtype, vectorValues } from '../../../adapters/protocol/output-types.js';
import type { ChunkRow, DocumentState, Store } from '../../../adapters/stores/store.js';
import { shapeDense } from '../../../pipelines/inference/dense-output.js';
import { referencePackbits, referenceValues, unitVectors } from '../../helpers/reference-quantize.js';

/**
 * The output-type part of the Store contract (contract.ts runs it for every backend that
 * gives a reader): rows of each type are written the way ingest writes them (Shoal's own
 * Matryoshka cut and quantization), read back through the backend's own client or SQL, and
 * compared with the independent reference (test/helpers/reference-quantize.ts); a clear query
 * finds the same top row in every type; a table of one type refuses another type.
 */

/** How a backend's test reads what its store holds, without the sink. */
export interface StoredVectorReader {
  /** The stored vector of row `id` in `table`, as the type's values (any unpacking done with the test's own helpers). */
  read(table: string, id: string, type: EmbeddingDtype): Promise<number[]>;
  /** How the store reports the vector's storage of `table` (a column type, an Arrow type, a datatype). */
  storage(table: string, type: EmbeddingDtype): Promise<string>;
  /** What `storage` must report per type: the backend's native type where it has one (docs/storage.md). */
  native: Readonly<Record<EmbeddingDtype, string>>;
}

const FULL = 32;
/** Matryoshka cut: not a multiple of 8, so the binary types carry 4 padding bits. */
const CUT = 20;
const SOURCES = unitVectors(6, FULL, 11);
const TYPES = EmbeddingDtype.options;

/** The reference of the cut: first CUT values, L2-normalized again, in float64 then float32. */
function referenceCut(v: readonly number[]): number[] {
  const cut = v.slice(0, CUT);
  const norm = Math.sqrt(cut.reduce((sum, x) => sum + x * x, 0));
  return cut.map((x) => Math.fround(x / norm));
}

/** Shoal's own conversion, as the engine applies it to an encode request with `dtype` and `dimensions`. */
function shoalTyped(v: readonly number[], type: EmbeddingDtype): number[] {
  return vectorValues(shapeDense(Float32Array.from(v), { dtype: type, dimensions: CUT }), type);
}

/** Shoal's values against the reference: sign bits exactly; a code, or a half step, of float32 rounding otherwise. */
function expectNearReference(actual: readonly number[], expected: readonly number[], type: EmbeddingDtype, label: string): void {
  expect(actual, label).toHaveLength(expected.length);
  const tolerance = (x: number): number => {
    if (type === 'binary' || type === 'ubinary') return 0;
    if (type === 'int8' || type === 'uint8') return 1;
    if (type === 'float16') return Math.abs(x) / 1024 + 1e-7;
    return 1e-6;
  };
  expect(actual.filter((x, i) => Math.abs(x - (expected[i] ?? Number.NaN)) > tolerance(expected[i] ?? 0)), label).toEqual([]);
}

function typedRow(i: number, type: EmbeddingDtype): ChunkRow {
  return {
    id: `r${i}`, document_id: `d${i}`, source: `s${i}`, page: 1, chunk: 0, text: `row ${i}`, start: 0, end: 5, heading: null, settings: 's',
    vector: shoalTyped(SOURCES[i] ?? [], type), entities: null, labels: null, ingested_at: '2026-01-01T00:00:00.000Z',
  };
}

function stateOf(row: ChunkRow): DocumentState {
  return { source: row.source, document_id: row.document_id, settings: 's', chunks: 1, pages: 1, ingested_at: row.ingested_at };
}

/** Bits that differ, counted on the reference's bit strings (independent of the sink's Hamming code). */
function referenceHamming(a: readonly number[], b: readonly number[], type: EmbeddingDtype): number {
  const bits = (v: readonly number[]): string => v.map((x) => (type === 'binary' ? x + 128 : x).toString(2).padStart(8, '0')).join('');
  const x = bits(a);
  const y = bits(b);
  let differ = 0;
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) differ += 1;
  return differ;
}

/** A clear query: row 2's direction, slightly moved towards row 4. */
const QUERY = (SOURCES[2] ?? []).map((x, d) => x + 0.1 * (SOURCES[4]?.[d] ?? 0));

export function vectorTypeContract(open: (table: string) => Store, reader: StoredVectorReader | undefined): void {
  it.skipIf(reader === undefined)('stores every output type (Matryoshka cut included) as the reference computes it, natively where the backend can', async () => {
    if (reader === undefined) return;
    const topHits = new Map<EmbeddingDtype, string | undefined>();
    for (const type of TYPES) {
      const table = `types-${type}`;
      const rows = SOURCES.map((_, i) => typedRow(i, type));
      const dimension = rows[0]?.vector.length ?? 0;
      expect(dimension, type).toBe(type === 'binary' || type === 'ubinary' ? Math.ceil(CUT / 8) : CUT);
      const sink = open(table);
      // l2: Qdrant does not normalise stored vectors under it, and it ranks unit vectors as cosine does.
      await sink.prepare({ dimension, distance: 'l2', vectorType: type, optionalColumns: [], metadata: { model: 'm', dimensions: String(CUT) } });
      await sink.commit(rows, rows.map(stateOf));
      expect(await sink.describe(), type).toMatchObject({ dimension, distance: 'l2', vectorType: type, metadata: { dimensions: String(CUT) } });
      expect(await reader.storage(table, type), type).toBe(reader.native[type]);

      for (const [i, row] of rows.entries()) {
        const written = Array.from(row.vector);
        expectNearReference(written, referenceValues(referenceCut(SOURCES[i] ?? []), type), type, `${type} row ${i} vs reference`);
        // The store's round trip itself is exact: codes and half values are exact in every form used.
        expect(await reader.read(table, row.id, type), `${type} row ${i} read back`).toEqual(written);
      }
      if (type === 'ubinary') expect(rows[3]?.vector).toEqual(referencePackbits(referenceCut(SOURCES[3] ?? [])));

      const query = shoalTyped(QUERY, type);
      const hits = await sink.search(query, { k: 3 });
      topHits.set(type, hits[0]?.row.id);
      if (type === 'binary' || type === 'ubinary') {
        // A binary table scores 1 − 2·hamming/bits (the cosine of the ±1 sign vectors).
        const bits = 8 * dimension;
        for (const hit of hits) {
          const stored = rows.find((r) => r.id === hit.row.id)?.vector ?? [];
          expect(hit.score, `${type} ${hit.row.id}`).toBeCloseTo(1 - (2 * referenceHamming(query, Array.from(stored), type)) / bits, 9);
        }
      }
      await sink.close();
    }
    // The same clear query finds the same row in every type whose codes keep the geometry
    // (uint8 codes are shifted by 128: they rank by l2, as here, and not by cosine or dot).
    expect(topHits.get('float32')).toBe('r2');
    for (const type of TYPES) expect(topHits.get(type), type).toBe('r2');
  });

  it('refuses rows, queries and specs of another output type than the table stores; older specs read as float32', async () => {
    const sink = open('types-refused');
    expect(await sink.describe()).toBeNull();
    await sink.prepare({ dimension: CUT, distance: 'cosine', vectorType: 'int8', optionalColumns: [], metadata: {} });
    await expect(sink.prepare({ dimension: CUT, distance: 'cosine', vectorType: 'float16', optionalColumns: [], metadata: {} })).rejects.toMatchObject({
      code: ErrorCode.CONFIG_INVALID,
      message: expect.stringContaining('int8 vectors (the pipeline asks float16)'),
    });
    // A spec without a type is a float32 spec: refused by an int8 table.
    await expect(sink.prepare({ dimension: CUT, distance: 'cosine', optionalColumns: [], metadata: {} })).rejects.toMatchObject({ code: ErrorCode.CONFIG_INVALID });
    const float = { ...typedRow(0, 'float32') };
    await expect(sink.commit([float], [stateOf(float)])).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('not a int8 vector') });
    const codes = typedRow(1, 'int8');
    await sink.commit([codes], [stateOf(codes)]);
    await expect(sink.search(shoalTyped(QUERY, 'float32'), { k: 1 })).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT });
    expect((await sink.search(shoalTyped(QUERY, 'int8'), { k: 1 }))[0]?.row.id).toBe('r1');
    await sink.close();

    const plain = open('types-plain');
    await plain.prepare({ dimension: 3, distance: 'cosine', optionalColumns: [], metadata: {} });
    await plain.close();
    expect((await open('types-plain').describe())?.vectorType).toBe('float32');
  });
}
