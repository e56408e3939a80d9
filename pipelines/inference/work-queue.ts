/**
 * The queue of one model (pure data structure, no timers, no I/O). Interactive items wait in FIFO
 * order; bulk items wait in buckets by token length, so a batch is cut from items of similar length
 * (little padding) without sorting the whole backlog each time. Items that would share a batch must
 * have the same `key` (run options). An item waiting longer than `maxItemWaitMs` anchors the next
 * batch, so short items are never starved by a stream of long ones. Batches are cut by the
 * packing rules of batcher.ts.
 */

import { fitsBudget, similarLength, type BatchLimits, type LengthRule } from './batcher.js';

export interface Queued<T> {
  readonly payload: T;
  readonly cost: number;
  readonly key: string;
  readonly enqueuedAt: number;
  /** Set when the item left the queue (taken or dropped); lazy deletion from the FIFO views. */
  gone: boolean;
}

export interface CutOptions extends BatchLimits, LengthRule {
  /** Items older than this anchor the next bulk batch. */
  maxItemWaitMs: number;
}

export interface CutBatch<T> {
  items: Queued<T>[];
  key: string;
  realTokens: number;
  paddedTokens: number;
}

class BulkGroup<T> {
  /** cost → items of that cost, FIFO. */
  readonly buckets = new Map<number, Queued<T>[]>();
  /** Distinct costs present, ascending. */
  readonly costs: number[] = [];
  /** All items in arrival order (with gone ones not yet trimmed). */
  readonly arrival: Queued<T>[] = [];
  size = 0;

  add(item: Queued<T>): void {
    let bucket = this.buckets.get(item.cost);
    if (bucket === undefined) {
      bucket = [];
      this.buckets.set(item.cost, bucket);
      let lo = 0;
      let hi = this.costs.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if ((this.costs[mid] ?? 0) < item.cost) lo = mid + 1;
        else hi = mid;
      }
      this.costs.splice(lo, 0, item.cost);
    }
    bucket.push(item);
    this.arrival.push(item);
    this.size++;
  }

  oldest(): Queued<T> | undefined {
    while (this.arrival.length > 0 && this.arrival[0]?.gone === true) this.arrival.shift();
    return this.arrival[0];
  }

  /** Removes and returns the first live item of the bucket for `cost`. */
  takeFrom(cost: number): Queued<T> | undefined {
    const bucket = this.buckets.get(cost);
    if (bucket === undefined) return undefined;
    while (bucket.length > 0) {
      const item = bucket.shift();
      if (item !== undefined && !item.gone) {
        item.gone = true;
        this.size--;
        if (bucket.length === 0) this.#dropCost(cost);
        return item;
      }
    }
    this.#dropCost(cost);
    return undefined;
  }

  /** Removes one specific live item. */
  remove(item: Queued<T>): void {
    const bucket = this.buckets.get(item.cost);
    const at = bucket?.indexOf(item) ?? -1;
    if (bucket === undefined || at < 0 || item.gone) return;
    bucket.splice(at, 1);
    item.gone = true;
    this.size--;
    if (!bucket.some((i) => !i.gone)) this.#dropCost(item.cost);
  }

  /** Whether a live item of exactly this cost waits. */
  has(cost: number): boolean {
    const bucket = this.buckets.get(cost);
    return bucket !== undefined && bucket.some((item) => !item.gone);
  }

  #dropCost(cost: number): void {
    this.buckets.delete(cost);
    const at = this.costs.indexOf(cost);
    if (at >= 0) this.costs.splice(at, 1);
  }
}

export class ModelWorkQueue<T> {
  readonly #interactive: Queued<T>[] = [];
  readonly #bulk = new Map<string, BulkGroup<T>>();
  #interactiveSize = 0;

  get interactiveSize(): number {
    return this.#interactiveSize;
  }

  get bulkSize(): number {
    let n = 0;
    for (const group of this.#bulk.values()) n += group.size;
    return n;
  }

  /** Padded tokens of bulk work waiting (an upper bound on what the next batches can hold). */
  bulkTokens(): number {
    let total = 0;
    for (const group of this.#bulk.values()) {
      for (const [cost, bucket] of group.buckets) for (const item of bucket) if (!item.gone) total += cost;
    }
    return total;
  }

  addInteractive(item: Queued<T>): void {
    this.#interactive.push(item);
    this.#interactiveSize++;
  }

  addBulk(item: Queued<T>): void {
    let group = this.#bulk.get(item.key);
    if (group === undefined) {
      group = new BulkGroup<T>();
      this.#bulk.set(item.key, group);
    }
    group.add(item);
  }

  /** Marks an item as dropped (cancelled); it is skipped when batches are cut. */
  drop(item: Queued<T>): void {
    if (item.gone) return;
    item.gone = true;
    const group = this.#bulk.get(item.key);
    if (group !== undefined && group.buckets.get(item.cost)?.includes(item) === true) group.size--;
    else this.#interactiveSize--;
  }

  oldestBulk(): Queued<T> | undefined {
    let oldest: Queued<T> | undefined;
    for (const group of this.#bulk.values()) {
      const head = group.oldest();
      if (head !== undefined && (oldest === undefined || head.enqueuedAt < oldest.enqueuedAt)) oldest = head;
    }
    return oldest;
  }

  /** Interactive items in arrival order, same key as the first, within the budget. */
  cutInteractive(options: CutOptions): CutBatch<T> | null {
    while (this.#interactive.length > 0 && this.#interactive[0]?.gone === true) this.#interactive.shift();
    const head = this.#interactive[0];
    if (head === undefined) return null;
    const items: Queued<T>[] = [];
    let longest = 0;
    let real = 0;
    for (const item of this.#interactive) {
      if (item.gone || item.key !== head.key) continue;
      const nextLongest = Math.max(longest, item.cost);
      if (items.length > 0 && !fitsBudget(nextLongest, items.length + 1, options)) break;
      items.push(item);
      longest = nextLongest;
      real += item.cost;
    }
    for (const item of items) {
      item.gone = true;
      this.#interactiveSize--;
    }
    return { items, key: head.key, realTokens: real, paddedTokens: longest * items.length };
  }

  /**
   * A bulk batch from the group of the oldest item: starting at the longest waiting item (or at an
   * item that waited too long), items of decreasing length join while padding stays within the
   * ratio and the padded cost within the budget.
   */
  cutBulk(options: CutOptions, now: number): CutBatch<T> | null {
    const oldest = this.oldestBulk();
    if (oldest === undefined) return null;
    const group = this.#bulk.get(oldest.key);
    if (group === undefined) return null;
    const aged = now - oldest.enqueuedAt >= options.maxItemWaitMs;
    const items: Queued<T>[] = [];
    let longest = 0;
    let real = 0;
    if (aged) {
      // Take the aged item itself first, then fill with others of its length class.
      group.remove(oldest);
      items.push(oldest);
      longest = oldest.cost;
      real = oldest.cost;
    }
    const startCost = aged ? oldest.cost : (group.costs[group.costs.length - 1] ?? 0);
    for (let c = group.costs.length - 1; c >= 0; c--) {
      const cost = group.costs[c] ?? 0;
      if (cost > startCost) continue;
      const base = longest === 0 ? cost : longest;
      if (items.length > 0 && !similarLength(base, cost, options)) break;
      let full = false;
      while (group.has(cost)) {
        const count = items.length + 1;
        const nextLongest = Math.max(longest, cost);
        if (items.length > 0 && !fitsBudget(nextLongest, count, options)) {
          full = true;
          break;
        }
        const item = group.takeFrom(cost);
        if (item === undefined) break;
        items.push(item);
        longest = nextLongest;
        real += cost;
      }
      // Removing an emptied cost only shifts the entries above c, which were already visited.
      if (full) break;
    }
    if (group.size === 0) this.#bulk.delete(oldest.key);
    if (items.length === 0) return null;
    return { items, key: oldest.key, realTokens: real, paddedTokens: longest * items.length };
  }
}
