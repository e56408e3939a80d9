import { z } from 'zod';
import { S3Store } from '../../../adapters/object-store/index.js';
import { startS3Server, type S3ServerHandle } from '../../helpers/s3-server.js';
import { started, type StoreHarness } from './harness.js';

const BUCKET = 'shoal-index';
const PREFIX = 'contract';

/** JSON objects on a private s3rver; stored vectors read with the object store's plain API. */
export function s3Harness(): StoreHarness {
  let running: { server: S3ServerHandle; objects: S3Store } | undefined;
  /** The objects read back with the store's plain object API: rows are JSON lines whose `vector` holds the type's values. */
  const storedVector = async (table: string, id: string): Promise<number[]> => {
    const { objects } = started(running, 's3');
    for await (const object of objects.listFolder({ bucket: BUCKET, key: `${PREFIX}/${table}/rows` })) {
      const data = await objects.readIfExists({ bucket: BUCKET, key: object.key }, 1 << 20);
      for (const line of (data?.toString('utf8') ?? '').split('\n').filter((text) => text !== '')) {
        const row = z.object({ id: z.string(), vector: z.array(z.number()) }).passthrough().parse(JSON.parse(line));
        if (row.id === id) return row.vector;
      }
    }
    return [];
  };
  return {
    serves: 's3rver',
    start: async () => {
      const server = await startS3Server([BUCKET]);
      running = { server, objects: new S3Store(server.settings()) };
    },
    stop: async () => {
      running?.objects.close();
      await running?.server.stop();
    },
    uri: (table) => `s3://${BUCKET}/${PREFIX}?table=${table}`,
    // Each store opened from the URI builds its own S3 client from these settings, and closes it.
    parseOptions: () => ({ s3: started(running, 's3').server.settings() }),
    contract: {
      storedVectors: {
        read: storedVector,
        storage: async (table) => {
          const spec = await started(running, 's3').objects.readIfExists({ bucket: BUCKET, key: `${PREFIX}/${table}/spec.json` }, 1 << 20);
          return String(z.object({ vectorType: z.string() }).passthrough().parse(JSON.parse(spec?.toString('utf8') ?? '{}')).vectorType);
        },
        // JSON numbers: every type's values exactly, none packed natively.
        native: { float32: 'float32', float16: 'float16', int8: 'int8', uint8: 'uint8', binary: 'binary', ubinary: 'ubinary' },
      },
    },
  };
}
