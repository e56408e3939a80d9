import type pg from 'pg';
import { userTables, type IndexAdmin, type TableEntry } from '../shared/index-admin.js';
import { openPool, query, type PgConnection } from './pool.js';
import { pgTableNames } from './sql.js';

/**
 * IndexAdmin of a PostgreSQL database (pgvector/store.ts): a Shoal table T is the one with a `T__spec`
 * beside it (written in the transaction that creates T), so an application's own tables in the
 * same database are not listed. Sizes are PostgreSQL's own (pg_total_relation_size: heap, TOAST
 * and indexes) of T, `T__documents` and `T__spec`.
 */

const SPEC_SUFFIX = '__spec';
/** Names Shoal accepts (shared/table-spec.ts checkTableName): safe to quote into SQL. */
const TABLE_NAME = /^[A-Za-z0-9_-]{1,48}$/;

const LIST_SPECS =
  "SELECT c.relname AS name FROM pg_class c WHERE c.relkind = 'r' AND pg_table_is_visible(c.oid) AND right(c.relname, 6) = '__spec'";

const SIZE = 'SELECT sum(pg_total_relation_size(r))::text AS bytes FROM unnest(ARRAY[to_regclass($1), to_regclass($2), to_regclass($3)]) AS r WHERE r IS NOT NULL';

export class PgVectorAdmin implements IndexAdmin {
  readonly #pool: pg.Pool;

  constructor(options: { connection: PgConnection }) {
    this.#pool = openPool(options.connection, 1, 10_000);
  }

  async #exists(relation: string): Promise<boolean> {
    const result = await query<{ found: string | null }>(this.#pool, 'lookup', 'SELECT to_regclass($1)::text AS found', [relation]);
    return result.rows[0]?.found != null;
  }

  async tables(): Promise<TableEntry[]> {
    const specs = await query<{ name: string }>(this.#pool, 'list tables', LIST_SPECS);
    const names = userTables(specs.rows.map((row) => row.name.slice(0, -SPEC_SUFFIX.length)).filter((name) => TABLE_NAME.test(name)));
    const out: TableEntry[] = [];
    for (const name of names) {
      const t = pgTableNames(name);
      if (!(await this.#exists(t.chunks))) continue;
      const counted = await query<{ n: string }>(this.#pool, 'count', `SELECT count(*) AS n FROM ${t.chunks}`);
      out.push({ name, rows: Number(counted.rows[0]?.n ?? 0) });
    }
    return out;
  }

  async sizeBytes(table: string): Promise<number | null> {
    if (!TABLE_NAME.test(table)) return null;
    const t = pgTableNames(table);
    if (!(await this.#exists(t.chunks))) return null;
    const result = await query<{ bytes: string | null }>(this.#pool, 'size', SIZE, [t.chunks, t.documents, t.spec]);
    const bytes = result.rows[0]?.bytes;
    return bytes == null ? null : Number(bytes);
  }

  async close(): Promise<void> {
    await this.#pool.end().catch(() => undefined);
  }
}
