import { describe, expect, it } from 'vitest';
import { toNatsShoalError } from '../../../../adapters/nats/connection/nats-errors.js';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';

/** The client's JetStreamNotEnabled, which @nats-io/jetstream does not export: same name and shape. */
class JetStreamNotEnabled extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'JetStreamNotEnabled';
  }
}

describe('toNatsShoalError', () => {
  it('JetStream not answering (a server restarting, JetStream not back yet) is UNAVAILABLE, so bounded retries wait it out', () => {
    // Before: INTERNAL, which no retry takes — a 4 s broker restart failed a document of an ingest run
    // with "write ingest status …: jetstream is not enabled" (test/reliability/nats-outage-ingest.test.ts).
    const error = toNatsShoalError(new JetStreamNotEnabled('jetstream is not enabled'), 'write ingest status doc.1');
    expect(error.code).toBe(ErrorCode.UNAVAILABLE);
    expect(error.message).toBe('write ingest status doc.1: JetStream is not available on the server (not enabled, or still starting after a restart)');
  });

  it('an unknown failure stays INTERNAL', () => {
    expect(toNatsShoalError(new Error('something else'), 'x').code).toBe(ErrorCode.INTERNAL);
  });
});
