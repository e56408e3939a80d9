import type { KV } from '@nats-io/kv';
import { JS_CODES, isJsApiCode, toNatsShoalError } from './nats-errors.js';

/**
 * The one compare-and-set write of a KV record the ledgers share (documents/ledger.ts,
 * classify/ledger.ts): a KV create when `revision` is null (false when the key exists: another
 * writer was first), else an update at `revision` (false when it is no longer the latest).
 * Any other failure is thrown as a ShoalError naming `what`.
 */
export async function writeIfRevision(kv: KV, key: string, body: string, revision: number | null, what: string): Promise<boolean> {
  try {
    if (revision === null) await kv.create(key, body);
    else await kv.update(key, body, revision);
    return true;
  } catch (error) {
    if (isJsApiCode(error, JS_CODES.StreamWrongLastSequence)) return false;
    throw toNatsShoalError(error, what);
  }
}
