import type { ChildProcess } from 'node:child_process';
import { waitExit } from './child-process.js';

/**
 * The lifecycle every test server shares (nats-server, s3rver, Chroma, PGlite's socket): one
 * instance on a fixed port and data folder that `halt()` stops (the data kept: an outage),
 * `start()` brings back on the same port and data, `restart()` does both, and `stop()` ends for
 * good, removing the data. Each server says only how to launch an instance, when it is ready,
 * how to end it and what to remove.
 */

export interface Restartable {
  /** Starts the instance (nothing when one is running); resolves once it is ready. */
  start(): Promise<void>;
  /** Stops the instance and waits until it is gone, keeping its data (nothing when none runs). */
  halt(): Promise<void>;
  /** halt() then start(): the same port and data, as a server restarted in production. */
  restart(): Promise<void>;
  /** halt() then removes the data: the end. */
  stop(): Promise<void>;
}

export interface RestartableOptions<T> {
  /** Creates the instance (spawns the process, builds the server); readiness is awaited apart. */
  launch(): T;
  /** Resolves once `instance` serves; rejects when it cannot. */
  ready(instance: T): Promise<void>;
  /** Ends `instance` and resolves once it is gone. */
  end(instance: T): Promise<void>;
  /** What `stop()` removes after the last halt (the data folder). */
  remove(): Promise<void> | void;
}

export interface RestartableServer<T> {
  /** What a server's handle exposes (spread into it). */
  lifecycle: Restartable;
  /** The running instance (null while halted). */
  current(): T | null;
}

/** The lifecycle over one instance at a time. */
export function restartable<T>(options: RestartableOptions<T>): RestartableServer<T> {
  let running: T | null = null;
  const start = async (): Promise<void> => {
    if (running !== null) return;
    // Held before it is ready, so a halt() after a failed start still ends the instance.
    const instance = options.launch();
    running = instance;
    await options.ready(instance);
  };
  const halt = async (): Promise<void> => {
    const instance = running;
    running = null;
    if (instance !== null) await options.end(instance);
  };
  const lifecycle: Restartable = {
    start,
    halt,
    restart: async () => {
      await halt();
      await start();
    },
    stop: async () => {
      await halt();
      await options.remove();
    },
  };
  return { lifecycle, current: () => running };
}

/**
 * The lifecycle of a server run as a child process: ended with SIGTERM (waiting for its exit),
 * and its piped output drained once it is ready, so it never blocks on a full pipe.
 */
export function restartableChild(options: Omit<RestartableOptions<ChildProcess>, 'end'>): RestartableServer<ChildProcess> {
  return restartable({
    launch: options.launch,
    ready: async (child) => {
      await options.ready(child);
      child.stdout?.on('data', () => undefined);
      child.stderr?.on('data', () => undefined);
    },
    end: async (child) => {
      child.kill('SIGTERM');
      await waitExit(child);
    },
    remove: options.remove,
  });
}
