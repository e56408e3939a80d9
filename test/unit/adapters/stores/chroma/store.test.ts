import { afterAll, beforeAll } from 'vitest';
import { ChromaClient, type Collection } from 'chromadb';
import { ChromaStore } from '../../../../../adapters/stores/chroma/store.js';
import { startChromaServer, type ChromaServerHandle } from '../../../../helpers/chroma-server.js';
import { storeContract } from '../../../../conformance/stores/contract.js';

/** The Chroma sink against Chroma's own local server (from the chromadb package) on a loopback port. */

let server: ChromaServerHandle;
beforeAll(async () => {
  server = await startChromaServer();
}, 60_000);
afterAll(async () => server?.stop());

/** A collection through the chromadb client itself (not the sink). */
async function collection(name: string): Promise<Collection> {
  return new ChromaClient({ host: '127.0.0.1', port: server.port }).getCollection({ name });
}

/** 0/1 values packed 8 per byte, first in the high bit (binary: minus 128), written here apart from the sink's packing. */
function packed(bits: readonly number[], type: string): number[] {
  const bytes = (bits.map((bit) => (bit > 0.5 ? '1' : '0')).join('').match(/.{1,8}/g) ?? []).map((group) => parseInt(group.padEnd(8, '0'), 2));
  return type === 'binary' ? bytes.map((byte) => byte - 128) : bytes;
}

storeContract('chroma', (name) => new ChromaStore({ host: '127.0.0.1', port: server.port, collection: name }), {
  unsupportedFilters: ['like', 'null'],
  refusedMetadataFilters: ['negated', 'null', 'string-range'],
  storedVectors: {
    read: async (name, id, type) => {
      const found = await (await collection(name)).get({ ids: [id], include: ['embeddings'] });
      const embedding = found.embeddings[0] ?? [];
      return type === 'binary' || type === 'ubinary' ? packed(embedding, type) : embedding.map(Math.fround);
    },
    storage: async (name) => {
      const opened = await collection(name);
      const [first] = (await opened.get({ limit: 1, include: ['embeddings'] })).embeddings;
      return `${first?.length} float32, ${String(opened.metadata?.['hnsw:space'])}`;
    },
    // Chroma stores float32 only: the 8-bit codes and half values as float32, the binary types as 0/1 bits.
    native: { float32: '20 float32, l2', float16: '20 float32, l2', int8: '20 float32, l2', uint8: '20 float32, l2', binary: '24 float32, l2', ubinary: '24 float32, l2' },
  },
});
