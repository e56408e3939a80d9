import type { FamilyAdapter } from './family.js';
import { FAMILIES, type Family } from './registry.js';

/**
 * Each family's adapter, imported on demand (registry.ts holds the loaders). A model thread runs
 * one model, so it imports one family instead of all of them: the image families pull in sharp,
 * and every import is paid again by each new thread (a pool that evicts and loads all the time
 * starts many).
 */

type Loaded<K extends Family> = Awaited<ReturnType<(typeof FAMILIES)[K]['load']>>;

/**
 * Compile-time check of the registry: each loader returns a FamilyAdapter whose `name` is its
 * own key. A wrong entry (a loader returning another family's adapter, or an adapter whose name
 * is misspelled) makes `Misnamed` non-never and this line fail to compile, naming the key.
 */
type Misnamed = { [K in Family]: Loaded<K> extends FamilyAdapter<K> ? never : K }[Family];
const registryIsConsistent: [Misnamed] extends [never] ? true : Misnamed = true;
void registryIsConsistent;

export function loadFamily(name: Family): Promise<FamilyAdapter> {
  return FAMILIES[name].load();
}
