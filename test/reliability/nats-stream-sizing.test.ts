import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureIngestTopology, ingestNames } from '../../adapters/nats/ingest/ingest-store.js';
import { STREAM_BYTES_FLOOR } from '../../adapters/nats/connection/stream-sizing.js';
import { ensureTopology, type Topology } from '../../adapters/nats/connection/topology.js';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';

/**
 * Issue 42, item 17: the jobs, results and ingest streams each reserved 8 GiB (max_bytes), which
 * JetStream counts against the server's store when a stream is created, so a server with the
 * 10 GiB file store common charts default to refused Shoal's topology outright ("JetStream
 * answered 10047: insufficient storage resources available"). Unset, their sizes now come from
 * the free store (stream-sizing.ts); set, they are honoured; either way a store that is too
 * small is said plainly.
 */

const GIB = 1024 ** 3;
const MIB = 1024 ** 2;

async function maxBytes(topology: Topology, stream: string): Promise<number> {
  return (await topology.jsm.streams.info(stream)).config.max_bytes;
}

/** The three reserving streams of a prefix, created as services create them (the ingest one by a parse worker). */
async function createAll(nc: NatsConnection, prefix: string, sizes: { jobsMaxBytes?: number; resultsMaxBytes?: number } = {}): Promise<{ topology: Topology; bytes: number[] }> {
  const topology = await ensureTopology(nc, { prefix, ...sizes });
  const ingest = await ensureIngestTopology(nc, topology);
  const bytes = await Promise.all([topology.names.jobsStream, topology.names.resultsStream, ingest.stream].map((stream) => maxBytes(topology, stream)));
  return { topology, bytes };
}

async function reservedOnServer(server: NatsServerHandle): Promise<{ max: number; reserved: number }> {
  const varz = (await (await fetch(`http://127.0.0.1:${server.monitorPort}/varz`)).json()) as { jetstream?: { config?: { max_storage?: number }; stats?: { reserved_storage?: number } } };
  return { max: varz.jetstream?.config?.max_storage ?? 0, reserved: varz.jetstream?.stats?.reserved_storage ?? 0 };
}

describe.skipIf(!natsServerAvailable())(`JetStream stream sizes from the server's store${natsServerAvailable() ? '' : ` (${NATS_SERVER_MISSING})`}`, () => {
  describe('a server with a 10 GB file store (a common chart default)', () => {
    let server: NatsServerHandle;
    let nc: NatsConnection;
    beforeAll(async () => {
      server = await startNatsServer({ maxFileStore: '10GB' });
      nc = await connect({ servers: server.url });
    });
    afterAll(async () => {
      await nc?.close();
      await server?.stop();
    });

    it('creates the topology with defaults, a quarter of the store each, and a second prefix beside it', async () => {
      expect((await reservedOnServer(server)).max).toBe(10 * GIB);
      const first = await createAll(nc, 'first');
      // The largest of 8, 4, 2 GiB... of which four fit: 2 GiB each, 6 GiB of 10 reserved.
      expect(first.bytes).toEqual([2 * GIB, 2 * GIB, 2 * GIB]);
      expect(first.topology.streamBytes).toEqual({ jobs: 2 * GIB, results: 2 * GIB });
      // 4 GiB left: a second prefix gets 1 GiB each (four of them fit exactly).
      const second = await createAll(nc, 'second');
      expect(second.bytes).toEqual([GIB, GIB, GIB]);
      expect((await reservedOnServer(server)).reserved).toBe(9 * GIB);
      // A service starting again keeps the sizes the streams were given, whatever is free now.
      const again = await createAll(nc, 'first');
      expect(again.bytes).toEqual([2 * GIB, 2 * GIB, 2 * GIB]);
    });

    it('honours sizes that are set, and names the stream, its size, the store and the setting when one does not fit', async () => {
      const set = await createAll(nc, 'explicit', { jobsMaxBytes: 100 * MIB, resultsMaxBytes: 200 * MIB });
      expect(set.bytes).toEqual([100 * MIB, 200 * MIB, 100 * MIB]);
      // 9.4 GiB of 10 reserved by now: 8 GiB of results cannot fit.
      const refused = await ensureTopology(nc, { prefix: 'toobig', jobsMaxBytes: 100 * MIB, resultsMaxBytes: 8 * GIB }).catch((error: unknown) => error);
      expect(refused).toMatchObject({ code: ErrorCode.CONFIG_INVALID });
      const message = refused instanceof Error ? refused.message : String(refused);
      for (const part of ['TOOBIG_RESULTS', '8.00 GiB', 'resultsMaxBytes', 'max_file_store', 'no JetStream limit']) expect(message).toContain(part);
    });
  });

  describe('services starting together on a fresh 10 GB store', () => {
    let server: NatsServerHandle;
    const connections: NatsConnection[] = [];
    beforeAll(async () => {
      server = await startNatsServer({ maxFileStore: '10GB' });
      for (let i = 0; i < 3; i++) connections.push(await connect({ servers: server.url }));
    });
    afterAll(async () => {
      for (const nc of connections) await nc.close();
      await server?.stop();
    });

    it('all succeed, and the streams end with sizes that fit together', async () => {
      // A gateway, a worker and a sink: each creates the topology at start-up (compose starts them at once).
      const topologies = await Promise.all(connections.map((nc) => ensureTopology(nc, { prefix: 'race' })));
      const [first] = topologies;
      if (first === undefined) throw new Error('no topology');
      await Promise.all(connections.map((nc, i) => ensureIngestTopology(nc, topologies[i] ?? first)));
      const bytes = await Promise.all([first.names.jobsStream, first.names.resultsStream, 'RACE_INGEST'].map((stream) => maxBytes(first, stream)));
      for (const size of bytes) {
        expect(size).toBeGreaterThanOrEqual(STREAM_BYTES_FLOOR);
        expect(size).toBeLessThanOrEqual(2 * GIB);
      }
      const { max, reserved } = await reservedOnServer(server);
      const sum = bytes.reduce((a, b) => a + b, 0);
      expect(sum).toBeLessThanOrEqual(max);
      // nats-server 2.9's reserved_storage can wrap below zero when creates of one stream race
      // (once in CI: 2^64 − 2 GiB, the three streams holding 6 GiB): a server counting bug, not
      // a size Shoal gave; the streams' own sizes above are what Shoal decides.
      if (reserved <= max) expect(reserved).toBe(sum);
    });
  });

  describe('an account with a 1 GB JetStream limit on a larger server', () => {
    let server: NatsServerHandle;
    let nc: NatsConnection;
    beforeAll(async () => {
      server = await startNatsServer({ maxFileStore: '10GB', extraConfig: 'accounts {\n  SHOAL: { jetstream: { max_file: 1GB, max_mem: 64MB }, users: [ { user: shoal, password: secret } ] }\n}' });
      nc = await connect({ servers: server.url, user: 'shoal', pass: 'secret' });
    });
    afterAll(async () => {
      await nc?.close();
      await server?.stop();
    });

    it("sizes the streams from the account's limit read from the account info, and names it when they do not fit", async () => {
      const first = await createAll(nc, 'acct');
      // A quarter of 1 GiB each, without probing down from 8 GiB.
      expect(first.bytes).toEqual([256 * MIB, 256 * MIB, 256 * MIB]);
      // 256 MiB left in the account: a second prefix gets 64 MiB each.
      const second = await createAll(nc, 'acct2');
      expect(second.bytes).toEqual([64 * MIB, 64 * MIB, 64 * MIB]);
      const refused = await ensureTopology(nc, { prefix: 'acct3' }).catch((error: unknown) => error);
      expect(refused).toMatchObject({ code: ErrorCode.CONFIG_INVALID });
      const message = refused instanceof Error ? refused.message : String(refused);
      for (const part of ['ACCT3_JOBS', "the account's JetStream limit is 1.00 GiB", '960 MiB reserved by other streams']) expect(message, message).toContain(part);
    });
  });

  describe('a server with a 64 MB file store', () => {
    let server: NatsServerHandle;
    let nc: NatsConnection;
    beforeAll(async () => {
      server = await startNatsServer({ maxFileStore: '64MB' });
      nc = await connect({ servers: server.url });
    });
    afterAll(async () => {
      await nc?.close();
      await server?.stop();
    });

    it('refuses the defaults with a message naming the streams, what they need, what the server has and what to change, and creates nothing', async () => {
      const refused = await ensureTopology(nc, { prefix: 'tiny' }).catch((error: unknown) => error);
      expect(refused).toMatchObject({ code: ErrorCode.CONFIG_INVALID });
      const message = refused instanceof Error ? refused.message : String(refused);
      for (const part of ['TINY_JOBS', 'TINY_RESULTS', 'TINY_INGEST', `${STREAM_BYTES_FLOOR / MIB} MiB`, '256 MiB', 'max_file_store', 'jobsMaxBytes', 'resultsMaxBytes']) {
        expect(message, message).toContain(part);
      }
      const names: string[] = [];
      for await (const name of (await jetstreamManager(nc)).streams.names()) names.push(name);
      expect(names.filter((name) => name.startsWith('TINY_'))).toEqual([]);
    });

    it('creates the topology with sizes that are set and fit', async () => {
      const set = await createAll(nc, 'small', { jobsMaxBytes: 8 * MIB, resultsMaxBytes: 16 * MIB });
      expect(set.bytes).toEqual([8 * MIB, 16 * MIB, 8 * MIB]);
      expect(ingestNames(set.topology.names).stream).toBe('SMALL_INGEST');
    });
  });
});
