import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP relay to a local port that can stop passing the server's bytes back while its
 * connections stay open: a reply lost on the way (a stuck server, a middlebox, a half-open
 * connection), for tests of what waits on an answer that never comes.
 */
export interface FreezingRelay {
  port: number;
  /** A `postgres://` URL through the relay, `path` appended (`?table=…`). */
  url(path: string): string;
  /** From now on the server's bytes are dropped: the clients wait as on a lost reply. */
  freeze(): void;
  thaw(): void;
  /** Closes the relay and every connection through it (callers still waiting get a closed connection). */
  stop(): Promise<void>;
}

export async function startFreezingRelay(port: number): Promise<FreezingRelay> {
  let frozen = false;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(port, '127.0.0.1');
    sockets.add(client).add(upstream);
    client.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk) => {
      if (!frozen) client.write(chunk);
    });
    const close = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', close).on('error', close);
    upstream.on('close', close).on('error', close);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no relay port');
  return {
    port: address.port,
    url: (path) => `postgres://postgres@127.0.0.1:${address.port}/postgres${path}`,
    freeze: () => (frozen = true),
    thaw: () => (frozen = false),
    stop: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
