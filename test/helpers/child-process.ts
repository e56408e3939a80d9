import type { ChildProcess } from 'node:child_process';

/**
 * Waiting on the servers tests start as child processes (nats-server, s3rver): ready once a
 * marker line appears on one of its streams, or failed with the tail of its output when it
 * exits first.
 */
export function waitForOutput(child: ChildProcess, marker: string, on: 'stdout' | 'stderr', name: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    const watched = child[on];
    const other = on === 'stdout' ? child.stderr : child.stdout;
    const onData = (chunk: Buffer): void => {
      output += chunk.toString('utf8');
      if (output.includes(marker)) {
        watched?.off('data', onData);
        resolve();
      }
    };
    watched?.on('data', onData);
    other?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.once('exit', (code) => reject(new Error(`${name} exited with ${String(code)} before it was ready:\n${output.slice(-2000)}`)));
    child.once('error', reject);
  });
}

/** Resolves once the process has exited (at once when it already has). */
export function waitExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}
