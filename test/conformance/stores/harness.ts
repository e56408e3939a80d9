import type { IndexRefOptions } from '../../../adapters/stores/registry.js';
import type { ContractOptions } from './contract.js';

/**
 * How the shared contract suite (test/conformance/stores.test.ts) reaches one backend: what
 * serves it here, the index URI of a table, and what the contract must know about it. The suite
 * opens every store through the registry (`parseIndexRef(uri(table), parseOptions()).open()`),
 * as `shoal` does with an `--index` URI, so a backend's URI parsing is part of what it passes.
 *
 * The contract options are read when the suite is collected, before `start()`: their readers
 * reach the running server or folder through the harness's own state, valid between `start()`
 * and `stop()`, as `uri` and `parseOptions` are.
 */
export interface StoreHarness {
  /** What serves the backend in the suite (its title). */
  readonly serves: string;
  /** Starts the backend's server, or makes its temp folder. */
  start(): Promise<void>;
  /** Ends the server and removes its data. */
  stop(): Promise<void>;
  /** The index URI that names `table` on the running backend. */
  uri(table: string): string;
  /** Settings the URI is parsed with (credentials, S3 client settings); none when absent. */
  parseOptions?(): IndexRefOptions;
  /** Filter forms it refuses, and the readers of stored vectors through the backend's own client. */
  readonly contract: ContractOptions;
}

/** A harness's state between start() and stop(); a reader called outside that window is a bug in the suite. */
export function started<T>(value: T | undefined, backend: string): T {
  if (value === undefined) throw new Error(`the ${backend} harness is used before start()`);
  return value;
}
