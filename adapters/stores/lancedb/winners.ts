import type * as lancedb from '@lancedb/lancedb';
import { sqlStringList } from '../shared/filter.js';
import { toHitRow, type HitRow } from '../shared/table-spec.js';

/** A ranked search winner: its id, and the LanceDB row id (`_rowid`) the candidate read returned. */
export interface Winner {
  id: string;
  rowId: bigint;
}

/**
 * The hit columns of a search's ranked winners, by id. A vector search reads its candidates with
 * only `id`, `vector` and `_rowid` (reading text and metadata for all ~100 candidates cost a
 * third of a query at 1M rows), then this reads the k winners' columns by row id: a direct take,
 * no scan. A row id is an address, which a compaction committed by another process between the
 * two reads may move; so each row taken is checked against the id it should carry, and any
 * mismatch reads the winners again by id (a filtered scan: slower, always right). A winner
 * deleted in between is simply absent from the map.
 */
export async function winnerRows(chunks: lancedb.Table, columns: readonly string[], winners: readonly Winner[]): Promise<Map<string, HitRow>> {
  const out = new Map<string, HitRow>();
  if (winners.length === 0) return out;
  const taken = await readTaken(chunks, columns, winners);
  const takenIds = new Set(taken?.map((row) => row.id));
  const moved = taken === null || taken.length !== winners.length || winners.some((winner) => !takenIds.has(winner.id));
  const rows = moved ? (await chunks.query().where(`id IN ${sqlStringList(winners.map((winner) => winner.id))}`).select([...columns]).toArray()).map((raw: unknown) => toHitRow(raw)) : taken;
  for (const row of rows) out.set(row.id, row);
  return out;
}

/** The rows at the winners' row ids; null when an address no longer exists (LanceDB refuses the take). */
async function readTaken(chunks: lancedb.Table, columns: readonly string[], winners: readonly Winner[]): Promise<HitRow[] | null> {
  try {
    const raw: unknown[] = await chunks.takeRowIds(winners.map((winner) => winner.rowId)).select([...columns]).toArray();
    return raw.map((row) => toHitRow(row));
  } catch {
    return null;
  }
}
