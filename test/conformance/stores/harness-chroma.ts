import { ChromaClient, type Collection } from 'chromadb';
import { startChromaServer, type ChromaServerHandle } from '../../helpers/chroma-server.js';
import { started, type StoreHarness } from './harness.js';
import { packedBits } from './packed-bits.js';

/** Chroma's own local server (from the chromadb package) on a loopback port; stored vectors read with the chromadb client. */
export function chromaHarness(): StoreHarness {
  let server: ChromaServerHandle | undefined;
  /** A collection through the chromadb client itself (not the store). */
  const collection = async (name: string): Promise<Collection> => new ChromaClient({ host: '127.0.0.1', port: started(server, 'chroma').port }).getCollection({ name });
  return {
    serves: "Chroma's own server",
    start: async () => {
      server = await startChromaServer();
    },
    stop: async () => server?.stop(),
    uri: (name) => `${started(server, 'chroma').url}/${name}`,
    contract: {
      unsupportedFilters: ['like', 'null'],
      refusedMetadataFilters: ['negated', 'null', 'string-range'],
      storedVectors: {
        read: async (name, id, type) => {
          const found = await (await collection(name)).get({ ids: [id], include: ['embeddings'] });
          const embedding = found.embeddings[0] ?? [];
          return type === 'binary' || type === 'ubinary' ? packedBits(embedding, type) : embedding.map(Math.fround);
        },
        storage: async (name) => {
          const opened = await collection(name);
          const [first] = (await opened.get({ limit: 1, include: ['embeddings'] })).embeddings;
          return `${first?.length} float32, ${String(opened.metadata?.['hnsw:space'])}`;
        },
        // Chroma stores float32 only: the 8-bit codes and half values as float32, the binary types as 0/1 bits.
        native: { float32: '20 float32, l2', float16: '20 float32, l2', int8: '20 float32, l2', uint8: '20 float32, l2', binary: '24 float32, l2', ubinary: '24 float32, l2' },
      },
    },
  };
}
