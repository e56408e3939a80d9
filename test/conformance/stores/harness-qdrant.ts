import { QdrantClient } from '@qdrant/js-client-rest';
import { z } from 'zod';
import { pointId } from '../../../adapters/stores/qdrant/store.js';
import { startQdrantFake, type QdrantFakeHandle } from '../../helpers/qdrant-fake.js';
import { started, type StoreHarness } from './harness.js';
import { packedBits } from './packed-bits.js';

const DenseParams = z.object({ config: z.object({ params: z.object({ vectors: z.object({ dense: z.object({ size: z.number(), distance: z.string(), datatype: z.string().optional() }) }) }) }) });

/**
 * No Qdrant server can run on these machines: Qdrant is tested against test/helpers/qdrant-fake.ts,
 * a loopback server implementing Qdrant's documented REST contract for the calls the store makes;
 * stored vectors read with Qdrant's own REST client.
 */
export function qdrantHarness(): StoreHarness {
  let server: QdrantFakeHandle | undefined;
  /** Qdrant's own REST client (not the store). */
  const client = (): QdrantClient => new QdrantClient({ host: '127.0.0.1', port: started(server, 'qdrant').port, https: false, checkCompatibility: false });
  return {
    serves: 'REST contract server',
    start: async () => {
      server = await startQdrantFake();
    },
    stop: async () => server?.stop(),
    uri: (collection) => `qdrant://127.0.0.1:${started(server, 'qdrant').port}/${collection}`,
    contract: {
      unsupportedFilters: ['like'],
      refusedMetadataFilters: ['string-range'],
      storedVectors: {
        read: async (collection, id, type) => {
          const [point] = await client().retrieve(collection, { ids: [pointId(id)], with_vector: true, with_payload: false });
          const dense = z.object({ dense: z.array(z.number()) }).parse(point?.vector).dense;
          return type === 'binary' || type === 'ubinary' ? packedBits(dense, type) : dense.map(Math.fround);
        },
        storage: async (collection) => {
          const { dense } = DenseParams.parse(await client().getCollection(collection)).config.params.vectors;
          return `${dense.size} ${dense.distance} ${dense.datatype ?? 'float32'}`;
        },
        // float16 and uint8 natively; int8 codes as float32; the binary types as one 0/1 uint8 per dimension under Euclid (Hamming).
        native: { float32: '20 Euclid float32', float16: '20 Euclid float16', int8: '20 Euclid float32', uint8: '20 Euclid uint8', binary: '24 Euclid uint8', ubinary: '24 Euclid uint8' },
      },
    },
  };
}
