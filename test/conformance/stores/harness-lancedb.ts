import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { z } from 'zod';
import { started, type StoreHarness } from './harness.js';

/** LanceDB embedded in a temp folder; stored vectors read with LanceDB's own client. */
export function lancedbHarness(): StoreHarness {
  let dir: string | undefined;
  /** A table opened with LanceDB's own client (not the store). */
  const table = async (name: string): Promise<lancedb.Table> => (await lancedb.connect(started(dir, 'lancedb'))).openTable(name);
  return {
    serves: 'embedded, in a temp folder',
    start: async () => {
      dir = await mkdtemp(join(tmpdir(), 'shoal-lancedb-'));
    },
    stop: async () => {
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    },
    uri: (name) => `lancedb://${started(dir, 'lancedb')}?table=${name}`,
    contract: {
      storedVectors: {
        read: async (name, id, type) => {
          const [row] = await (await table(name)).query().where(`id = '${id}'`).select(['vector']).toArray();
          const values = Array.from(z.custom<Iterable<number>>((value) => typeof value === 'object' && value !== null && Symbol.iterator in value).parse(row?.vector));
          // The binary types are stored as unsigned bytes.
          return type === 'binary' ? values.map((byte) => byte - 128) : values;
        },
        storage: async (name) => String((await (await table(name)).schema()).fields.find((field) => field.name === 'vector')?.type),
        native: {
          float32: 'FixedSizeList[20]<Float32>',
          float16: 'FixedSizeList[20]<Float16>',
          int8: 'FixedSizeList[20]<Float32>',
          uint8: 'FixedSizeList[20]<Float32>',
          binary: 'FixedSizeList[3]<Uint8>',
          ubinary: 'FixedSizeList[3]<Uint8>',
        },
      },
    },
  };
}
