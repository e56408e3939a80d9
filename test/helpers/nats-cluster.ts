import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { waitExit, waitForOutput } from './child-process.js';
import { eventually, freePorts, NATS_SERVER_BIN } from './nats-server.js';
import { restartableChild, type Restartable } from './restartable.js';

/**
 * A JetStream cluster of N nats-server processes on loopback for one test file (test/helpers/
 * nats-server.ts starts one server; this starts N routed to each other): each with its own name
 * (`--server_name`, the name JetStream reports as a stream's leader), free client, monitor and
 * cluster ports and its own store folder. Ready once every server answers /healthz (JetStream in
 * contact with a meta leader) and sees a meta group of N. A server can be killed with any signal
 * (SIGKILL: a crash) and restarted on the same ports and store, as a broker pod rescheduled with
 * its volume would be.
 */

/**
 * The nats-server the cluster runs: SHOAL_NATS_CLUSTER_SERVER, else the one the other tests run
 * (SHOAL_NATS_SERVER, /usr/sbin/nats-server). Replicated streams need a newer server than Debian
 * bookworm's 2.9.10 (adapters/nats/connection/topology.ts MIN_REPLICATED_SERVER); trixie's package (2.10)
 * runs on bookworm: `apt-get download nats-server/trixie`, `dpkg-deb -x`, and point this at it.
 */
export const NATS_CLUSTER_SERVER_BIN = process.env.SHOAL_NATS_CLUSTER_SERVER ?? NATS_SERVER_BIN;

/** The version a nats-server binary reports (`2.9.10`), null when it cannot be run. */
export function natsServerVersion(bin: string = NATS_CLUSTER_SERVER_BIN): string | null {
  const run = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 10_000 });
  return /v?(\d+\.\d+\.\d+\S*)/.exec(`${run.stdout ?? ''}${run.stderr ?? ''}`)?.[1] ?? null;
}

/** One server of the cluster: the Restartable lifecycle of a single test server, plus kill(). */
export interface ClusterServer extends Restartable {
  /** Its `--server_name`: what `streams.info(...).cluster.leader` and `.replicas[].name` say. */
  readonly name: string;
  readonly url: string;
  readonly port: number;
  readonly monitorPort: number;
  readonly clusterPort: number;
  readonly storeDir: string;
  /** Process id of the running server (null while stopped). */
  pid(): number | null;
  /**
   * Sends `signal` to the running server and waits for it to exit; the server then counts as
   * halted, so start() or restart() brings it back on the same ports and store. @default 'SIGKILL'
   */
  kill(signal?: NodeJS.Signals): Promise<void>;
}

export interface NatsClusterHandle {
  /** Client URLs of every server, for a connection that may use any of them. */
  readonly urls: readonly string[];
  readonly servers: readonly ClusterServer[];
  /** The server of this `--server_name` (throws for another name). */
  server(name: string): ClusterServer;
  /** Stops every server and removes the stores. */
  stop(): Promise<void>;
}

export interface NatsClusterOptions {
  /** Servers in the cluster. @default 3 */
  size?: number;
  /** Cluster name, also the prefix of the server names (`<name>-0`...). @default 'shoal-test' */
  name?: string;
  /** How long the cluster (or a restarted server) may take to become healthy (a loaded 2-core machine running three test lanes took over 20 s to form one). @default 60000 */
  readyTimeoutMs?: number;
  /** @default NATS_CLUSTER_SERVER_BIN */
  bin?: string;
}

/** The part of the monitor port's /jsz this helper reads (nats-server 2.9). */
const Jsz = z.looseObject({
  meta_cluster: z.looseObject({ leader: z.string().optional(), cluster_size: z.number().int().optional() }).optional(),
});

async function monitor(port: number, path: string): Promise<{ ok: boolean; body: unknown }> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(2_000) });
  return { ok: response.ok, body: await response.json() };
}

/** Resolves once the server's JetStream is healthy (in contact with the meta leader, its assets current) and sees `size` peers with a leader. */
async function healthy(monitorPort: number, size: number, timeoutMs: number): Promise<void> {
  await eventually(async () => {
    const health = await monitor(monitorPort, '/healthz');
    if (!health.ok) throw new Error(`/healthz on ${monitorPort}: ${JSON.stringify(health.body)}`);
    const meta = Jsz.parse((await monitor(monitorPort, '/jsz')).body).meta_cluster;
    if (meta?.leader === undefined || meta.leader === '' || meta.cluster_size !== size) throw new Error(`/jsz on ${monitorPort}: meta group ${JSON.stringify(meta)}`);
  }, timeoutMs);
}

/**
 * How long a fresh cluster may take to form before it is started again from scratch, and how many
 * times: servers started together sometimes form a JetStream meta group that misses one of them
 * (seen twice under CI load with 2.10.27: `cluster_size` 2 of 3 for a whole minute while the
 * routes were up), and a new start forms it.
 */
const FORMATION_TIMEOUT_MS = 30_000;
const FORMATION_ATTEMPTS = 3;

export async function startNatsCluster(options: NatsClusterOptions = {}): Promise<NatsClusterHandle> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startNatsClusterOnce(options, attempt < FORMATION_ATTEMPTS);
    } catch (error) {
      if (attempt >= FORMATION_ATTEMPTS) throw error;
    }
  }
}

async function startNatsClusterOnce(options: NatsClusterOptions, retryable: boolean): Promise<NatsClusterHandle> {
  const size = options.size ?? 3;
  const clusterName = options.name ?? 'shoal-test';
  const readyTimeoutMs = options.readyTimeoutMs ?? 60_000;
  const bin = options.bin ?? NATS_CLUSTER_SERVER_BIN;
  const root = mkdtempSync(join(tmpdir(), 'shoal-nats-cluster-'));
  // The first start of a cluster that may be started again gets the formation bound; restarts in a test the full one.
  let formed = false;
  const formationTimeoutMs = retryable ? Math.min(FORMATION_TIMEOUT_MS, readyTimeoutMs) : readyTimeoutMs;
  const ports: Array<{ client: number; monitor: number; cluster: number }> = [];
  const free = await freePorts(size * 3);
  for (let i = 0; i < size; i++) ports.push({ client: free[3 * i] ?? 0, monitor: free[3 * i + 1] ?? 0, cluster: free[3 * i + 2] ?? 0 });
  const servers = ports.map((own, i): ClusterServer => {
    const name = `${clusterName}-${i}`;
    const storeDir = join(root, name);
    mkdirSync(storeDir);
    const routes = ports.filter((_, j) => j !== i).map((other) => `nats://127.0.0.1:${other.cluster}`);
    const args = ['-js', '-a', '127.0.0.1', '-p', String(own.client), '-m', String(own.monitor), '-sd', storeDir, '--server_name', name,
      '--cluster_name', clusterName, '--cluster', `nats://127.0.0.1:${own.cluster}`, '--routes', routes.join(',')];
    const server = restartableChild({
      launch: () => spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] }),
      // A lone server is ready at once; one (re)joining a cluster once JetStream is current.
      ready: async (child) => {
        let log = '';
        child.stderr?.on('data', (chunk: Buffer) => (log = (log + chunk.toString('utf8')).slice(-3000)));
        await waitForOutput(child, 'Server is ready', 'stderr', `nats-server ${name}`);
        const timeoutMs = formed ? readyTimeoutMs : formationTimeoutMs;
        try {
          await healthy(own.monitor, size, timeoutMs);
        } catch (error) {
          const state = child.exitCode !== null || child.signalCode !== null ? `exited (${String(child.exitCode ?? child.signalCode)})` : 'running';
          throw new Error(`nats-server ${name} (${state}) not healthy within ${timeoutMs} ms: ${String(error)}\n${log}`, { cause: error });
        }
      },
      remove: () => rmSync(storeDir, { recursive: true, force: true }),
    });
    return {
      name,
      url: `nats://127.0.0.1:${own.client}`,
      port: own.client,
      monitorPort: own.monitor,
      clusterPort: own.cluster,
      storeDir,
      pid: () => server.current()?.pid ?? null,
      kill: async (signal = 'SIGKILL') => {
        const child = server.current();
        if (child === null) return;
        child.kill(signal);
        await waitExit(child);
        // Already gone: halt() only forgets it (its SIGTERM reaches no process).
        await server.lifecycle.halt();
      },
      ...server.lifecycle,
    };
  });
  const stop = async (): Promise<void> => {
    await Promise.all(servers.map((server) => server.stop()));
    rmSync(root, { recursive: true, force: true });
  };
  try {
    // Together: each waits for the others' routes before JetStream elects a meta leader.
    await Promise.all(servers.map((server) => server.start()));
    formed = true;
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    urls: servers.map((server) => server.url),
    servers,
    server: (name) => {
      const found = servers.find((server) => server.name === name);
      if (found === undefined) throw new Error(`no server ${name} in the cluster (${servers.map((s) => s.name).join(', ')})`);
      return found;
    },
    stop,
  };
}
