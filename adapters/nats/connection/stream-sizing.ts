import { StorageType, type JetStreamManager, type StreamConfig } from '@nats-io/jetstream';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { isConcurrentCreate, isJsApiCode, jsApiCode, JS_CODES, toNatsShoalError } from './nats-errors.js';

/**
 * The byte limits (`max_bytes`) of the streams that reserve store: the jobs, results and ingest
 * streams. JetStream reserves a stream's max_bytes in the server's store (and the account's, where
 * it has a limit) when the stream is created, and refuses a stream that does not fit (10047,
 * "insufficient storage resources available"): three fixed 8 GiB streams did not fit a 10 GiB
 * store, nor two prefixes on a 46 GB one.
 *
 * Unless a size is set (topology `jobsMaxBytes`, `resultsMaxBytes`, which are honoured as given),
 * each of the three gets a quarter of the store that is still free when it is created, at most
 * 8 GiB, at least 64 MiB: the fourth quarter stays for what reserves nothing (status buckets,
 * object store, dead letters). A JetStream account limit is read from the account info; the
 * server's own limit (max_file_store, max_memory_store) is not visible to a client, so it is
 * probed: the stream is created with four times the size asked (it fits, or the server refuses
 * it and nothing is created) and shrunk to its size at once. An existing stream keeps its size.
 */

/** The size a stream gets when the store has room for four of it. @default 8 GiB */
export const STREAM_BYTES_CEILING = 8 * 1024 ** 3;
/** Below this, Shoal's streams do not fit, and topology creation fails saying so. */
export const STREAM_BYTES_FLOOR = 64 * 1024 ** 2;
/** Shares of the free store: one per reserving stream, one kept for the streams without a limit. */
export const FREE_STORE_SHARES = 4;

const MIB = 1024 ** 2;

/** JetStream's "does not fit" answers: the store (file or memory) of the server or the account. */
const NO_ROOM_CODES: readonly number[] = [10047, 10028];
/**
 * A clustered server (2.10 and later) places a stream before it reserves anything, and refuses one
 * no group of servers has room for as "no suitable peers for placement, insufficient storage";
 * the same code without that reason is another placement problem (more replicas than servers).
 */
export function isNoRoom(error: unknown): boolean {
  const code = jsApiCode(error);
  if (code === JS_CODES.NoPeers) return error instanceof Error && error.message.includes('insufficient storage');
  return code !== null && NO_ROOM_CODES.includes(code);
}

export function formatStreamBytes(bytes: number): string {
  return bytes >= 1024 ** 3 ? `${(bytes / 1024 ** 3).toFixed(2)} GiB` : `${(bytes / MIB).toFixed(0)} MiB`;
}

/** What the account info says about the store, for the sizes and for the messages. */
export interface StoreRoom {
  /** The account's limit (bytes), null when the account has none (the server's own is the limit). */
  accountLimit: number | null;
  /** Bytes the account stores now. */
  stored: number;
  /** Bytes the account's other streams (Shoal's own included) reserve (max_bytes × replicas), when it has a limit. */
  reservedByOthers: number;
  /** The account's largest max_bytes for one stream, null when none. */
  maxStreamBytes: number | null;
  storage: StorageType;
}

function serverLimitName(storage: StorageType): string {
  return storage === StorageType.Memory ? 'max_memory_store' : 'max_file_store';
}

function positive(value: number | undefined): number | null {
  return value !== undefined && value > 0 ? value : null;
}

/** `sizing`: the stream being created or resized, left out of the others' reservations. */
export async function readStoreRoom(jsm: JetStreamManager, storage: StorageType, sizing: string): Promise<StoreRoom> {
  try {
    const info = await jsm.getAccountInfo();
    const memory = storage === StorageType.Memory;
    const accountLimit = positive(memory ? info.limits.max_memory : info.limits.max_storage);
    let reservedByOthers = 0;
    // The reservations count only against an account limit; without one they need not be listed.
    if (accountLimit !== null) {
      for await (const stream of jsm.streams.list()) {
        const config = stream.config;
        if (config.name === sizing || config.storage !== storage || config.max_bytes <= 0) continue;
        reservedByOthers += config.max_bytes * Math.max(1, config.num_replicas);
      }
    }
    return {
      accountLimit,
      stored: memory ? info.memory : info.storage,
      reservedByOthers,
      maxStreamBytes: positive(memory ? info.limits.memory_max_stream_bytes : info.limits.storage_max_stream_bytes),
      storage,
    };
  } catch (error) {
    throw toNatsShoalError(error, 'read the JetStream account info');
  }
}

/** The room in words: the account's limit and use, or that the server's own limit applies. */
export function describeRoom(room: StoreRoom): string {
  const serverLimit = serverLimitName(room.storage);
  const stored = `${formatStreamBytes(room.stored)} stored`;
  if (room.accountLimit === null) {
    return `the account has no JetStream limit (${stored}), so the server's jetstream ${serverLimit}, less what every stream on it reserves, is the limit`;
  }
  return `the account's JetStream limit is ${formatStreamBytes(room.accountLimit)}, ${stored}, ${formatStreamBytes(room.reservedByOthers)} reserved by other streams (the server's ${serverLimit} may be lower)`;
}

function roundDownToMib(bytes: number): number {
  return Math.floor(bytes / MIB) * MIB;
}

export interface AutoSize {
  /**
   * Reserving streams of this prefix still missing, this one included, plus one for the streams
   * that reserve nothing: 4 for the jobs stream of a fresh server. 1: no probe, the stream is
   * created at its size (the ingest stream, whose users may create it but not update it).
   */
  shares: number;
  /** The largest size to try. */
  ceiling: number;
  /** Every reserving stream of the prefix, named in the message when they do not fit. */
  streams: readonly string[];
}

/** The sizes tried, largest first: the ceiling (within the account's room), halved down to the floor. */
function candidates(size: AutoSize, room: StoreRoom): number[] {
  let first = size.ceiling;
  if (room.accountLimit !== null) first = Math.min(first, (room.accountLimit - room.reservedByOthers) / size.shares);
  if (room.maxStreamBytes !== null) first = Math.min(first, room.maxStreamBytes);
  const out: number[] = [];
  for (let bytes = roundDownToMib(first); bytes >= STREAM_BYTES_FLOOR; bytes = roundDownToMib(bytes / 2)) out.push(bytes);
  return out;
}

async function existingBytes(jsm: JetStreamManager, name: string): Promise<number | null> {
  try {
    return (await jsm.streams.info(name)).config.max_bytes;
  } catch (error) {
    if (isJsApiCode(error, JS_CODES.StreamNotFound)) return null;
    throw toNatsShoalError(error, `read stream ${name}`);
  }
}

type StreamSpec = Partial<StreamConfig> & Pick<StreamConfig, 'name'>;

/**
 * Creates a missing stream at the largest candidate size that leaves room for the others, and
 * returns that size; a stream another service created meanwhile is kept with its own.
 */
export async function createAutoSized(jsm: JetStreamManager, spec: StreamSpec, size: AutoSize): Promise<number> {
  const room = await readStoreRoom(jsm, spec.storage ?? StorageType.File, spec.name);
  const tried = candidates(size, room);
  for (const bytes of tried) {
    const probe = bytes * size.shares;
    try {
      await jsm.streams.add({ ...spec, max_bytes: probe });
    } catch (error) {
      const raced = isConcurrentCreate(error);
      if (!raced && !isNoRoom(error)) throw toNatsShoalError(error, `create stream ${spec.name}`);
      // Another service created it a moment ago (it keeps the size it was given), or no room and nothing was created.
      const made = await existingBytes(jsm, spec.name);
      if (made !== null) return made;
      // Not there after all: the subjects overlap another stream of someone else's.
      if (raced) throw toNatsShoalError(error, `create stream ${spec.name}`);
      continue;
    }
    if (probe !== bytes) {
      try {
        const created = (await jsm.streams.info(spec.name)).config;
        await jsm.streams.update(spec.name, { ...created, max_bytes: bytes });
      } catch (error) {
        throw toNatsShoalError(error, `size stream ${spec.name} to ${formatStreamBytes(bytes)}`);
      }
    }
    return bytes;
  }
  const smallest = tried.at(-1) ?? STREAM_BYTES_FLOOR;
  throw new ShoalError(
    ErrorCode.CONFIG_INVALID,
    `NATS JetStream has no room for Shoal's streams ${size.streams.join(', ')}: each is sized from the free store ` +
      `(a quarter of it, ${formatStreamBytes(STREAM_BYTES_CEILING)} at most, ${formatStreamBytes(STREAM_BYTES_FLOOR)} at least), and the server refused ${spec.name} ` +
      `even at ${formatStreamBytes(smallest)}${size.shares > 1 ? ` (${size.shares} × ${formatStreamBytes(smallest)} = ${formatStreamBytes(smallest * size.shares)} free needed)` : ''}; ` +
      `${describeRoom(room)}. Give JetStream more store (the server's jetstream ${serverLimitName(room.storage)}, or the account's limit), ` +
      'or set the topology settings jobsMaxBytes and resultsMaxBytes (the ingest stream takes jobsMaxBytes) to sizes that fit',
    { details: { streams: [...size.streams], asked: smallest * size.shares, accountLimit: room.accountLimit } },
  );
}

/** A size that was set and does not fit: named with its setting, what the store has, and what to change. */
export async function explicitSizeRefused(jsm: JetStreamManager, spec: StreamSpec, setting: string, cause: unknown): Promise<ShoalError> {
  const room = await readStoreRoom(jsm, spec.storage ?? StorageType.File, spec.name);
  return new ShoalError(
    ErrorCode.CONFIG_INVALID,
    `NATS JetStream refused stream ${spec.name} with max_bytes ${formatStreamBytes(spec.max_bytes ?? 0)} (topology setting ${setting}): not enough store; ` +
      `${describeRoom(room)}. Set ${setting} smaller, leave it unset to size the stream from the free store, or give JetStream more store`,
    { cause, details: { stream: spec.name, asked: spec.max_bytes ?? 0, accountLimit: room.accountLimit } },
  );
}
