import { afterAll, beforeAll } from 'vitest';
import { ChromaSink } from '../../../adapters/sinks/chroma.js';
import { startChromaServer, type ChromaServerHandle } from '../../helpers/chroma-server.js';
import { sinkContract } from './sink-contract.js';

/** The Chroma sink against Chroma's own local server (from the chromadb package) on a loopback port. */

let server: ChromaServerHandle;
beforeAll(async () => {
  server = await startChromaServer();
}, 60_000);
afterAll(async () => server?.stop());

sinkContract('chroma', (collection) => new ChromaSink({ host: '127.0.0.1', port: server.port, collection }), { unsupportedFilters: ['like', 'null'] });
