import { JetStreamApiError } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { isNoRoom } from '../../../../adapters/nats/connection/stream-sizing.js';
import { checkReplicatedServer, MIN_REPLICATED_SERVER } from '../../../../adapters/nats/connection/topology.js';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';

/** A JetStream API answer as the client builds it from the server's error. */
function apiError(code: number, description: string): JetStreamApiError {
  return new JetStreamApiError({ err_code: code, code: 400, description });
}

describe('replicated streams', () => {
  it('are refused on servers older than 2.9.21 (concurrent compare-and-set writes both succeed there), allowed from it on', () => {
    expect(MIN_REPLICATED_SERVER).toBe('2.9.21');
    for (const old of ['2.9.10', '2.9.20', 'v2.8.4']) {
      expect(() => checkReplicatedServer(old, 3), old).toThrow(expect.objectContaining({ code: ErrorCode.CONFIG_INVALID, message: expect.stringContaining(`need nats-server 2.9.21 or newer, and this server is ${old}`) }));
    }
    for (const fine of ['2.9.21', '2.10.27', '2.11.0-RC.1', '3.0.0']) expect(() => checkReplicatedServer(fine, 3), fine).not.toThrow();
    // One replica is never refused, nor a version that cannot be read.
    expect(() => checkReplicatedServer('2.9.10', 1)).not.toThrow();
    expect(() => checkReplicatedServer(undefined, 3)).not.toThrow();
    expect(() => checkReplicatedServer('dev', 3)).not.toThrow();
  });

  it('a clustered server that has no room says "no suitable peers ... insufficient storage": a size to shrink, not a replica count to fix', () => {
    expect(isNoRoom(apiError(10005, 'no suitable peers for placement, insufficient storage'))).toBe(true);
    expect(isNoRoom(apiError(10005, 'no suitable peers for placement'))).toBe(false);
    expect(isNoRoom(apiError(10047, 'insufficient storage resources available'))).toBe(true);
    expect(isNoRoom(apiError(10074, 'replicas > 1 not supported in non-clustered mode'))).toBe(false);
  });
});
