import type { LoadedModel } from './loaded-model.js';
import type { ResidentModel } from './pool-options.js';

/**
 * The pool's record of each model it holds or is loading (its charge, leases, pin, last use), and
 * the questions the pool asks of those records: which idle model goes first, which have idled too
 * long, who holds the memory, how a record looks in a snapshot. Reads only: the pool changes them.
 */

export interface Entry {
  name: string;
  state: 'loading' | 'ready';
  ready: Promise<LoadedModel>;
  model: LoadedModel | null;
  chargedBytes: number;
  leases: number;
  pinned: boolean;
  lastUsed: number;
  /** Order of last use: a counter, since several uses can share one millisecond. */
  useSeq: number;
}

/** Whether the pool may evict this model now: loaded, no leases, not pinned. */
function evictable(entry: Entry): boolean {
  return entry.state === 'ready' && entry.leases === 0 && !entry.pinned;
}

/** The least recently used evictable model other than `self`, or null. */
export function lruIdle(entries: Iterable<Entry>, self: Entry): Entry | null {
  let victim: Entry | null = null;
  for (const entry of entries) {
    if (entry === self || !evictable(entry)) continue;
    if (victim === null || entry.useSeq < victim.useSeq) victim = entry;
  }
  return victim;
}

/** Whether this model is evictable and has not been used for `idleMs`. */
export function idledOut(entry: Entry, now: number, idleMs: number): boolean {
  return evictable(entry) && now - entry.lastUsed >= idleMs;
}

/** The models other than `self` that hold memory, each with why it cannot go ("pinned", "2 in flight"). */
export function memoryHolders(entries: Iterable<Entry>, self: Entry): string[] {
  return [...entries].filter((e) => e !== self && e.chargedBytes > 0).map((e) => `${e.name} (${e.pinned ? 'pinned' : `${e.leases} in flight`})`);
}

/** A record as the pool's snapshot shows it. */
export function residentModel(entry: Entry): ResidentModel {
  return {
    name: entry.name,
    family: entry.model?.profile.family ?? null,
    state: entry.state,
    chargedBytes: entry.chargedBytes,
    predictedBytes: entry.model?.predictedBytes ?? null,
    measuredBytes: entry.model?.measuredBytes ?? null,
    lastUsed: entry.lastUsed,
    inFlight: entry.leases,
    pinned: entry.pinned,
    interactive: entry.model?.interactive !== null && entry.model?.interactive !== undefined,
  };
}
