import pg from 'pg';
import { startPgliteServer, type PgliteServerHandle } from '../../helpers/pglite-server.js';
import { started, type StoreHarness } from './harness.js';

/** `vector::text` as the type's values: `[..]` floats read as float32, a bit string as its bytes (binary: minus 128). */
function fromText(text: string, type: string): number[] {
  if (type !== 'binary' && type !== 'ubinary') return text.slice(1, -1).split(',').map((x) => Math.fround(Number(x)));
  const bytes = (text.match(/.{1,8}/g) ?? []).map((bits) => parseInt(bits.padEnd(8, '0'), 2));
  return type === 'binary' ? bytes.map((byte) => byte - 128) : bytes;
}

/** PostgreSQL+pgvector (PGlite) on a loopback port, reached by the production `pg` driver; stored vectors read with SQL through a plain `pg` client. */
export function pgvectorHarness(): StoreHarness {
  let server: PgliteServerHandle | undefined;
  /** One statement through a plain `pg` client (not the store). */
  const sql = async <R extends pg.QueryResultRow>(text: string, params: unknown[] = []): Promise<R[]> => {
    const client = new pg.Client({ host: '127.0.0.1', port: started(server, 'pgvector').port, user: 'postgres', database: 'postgres', ssl: false });
    await client.connect();
    try {
      return (await client.query<R>(text, params)).rows;
    } finally {
      await client.end();
    }
  };
  return {
    serves: 'PGlite on a loopback port',
    start: async () => {
      server = await startPgliteServer();
    },
    stop: async () => server?.stop(),
    uri: (table) => `${started(server, 'pgvector').url}?table=${table}`,
    contract: {
      storedVectors: {
        read: async (table, id, type) => fromText((await sql<{ v: string }>(`SELECT vector::text AS v FROM "${table}" WHERE id = $1`, [id]))[0]?.v ?? '', type),
        storage: async (table) =>
          (await sql<{ t: string }>(`SELECT format_type(atttypid, atttypmod) AS t FROM pg_attribute WHERE attrelid = $1::regclass AND attname = 'vector'`, [`"${table}"`]))[0]?.t ?? '',
        // 20 dimensions; the binary types 3 bytes = 24 bits (the last 4 zero).
        native: { float32: 'vector(20)', float16: 'halfvec(20)', int8: 'vector(20)', uint8: 'vector(20)', binary: 'bit(24)', ubinary: 'bit(24)' },
      },
    },
  };
}
