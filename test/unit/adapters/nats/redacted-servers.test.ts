import { describe, expect, it } from 'vitest';
import { redacted } from '../../../../adapters/nats/connection/connection.js';

/** NATS server URLs as they appear in logs and connection errors: no part of a credential. */

describe('redacted NATS servers', () => {
  it('hides a token, a user and password, and a password holding / or @ that was not percent-encoded', () => {
    expect(redacted(['nats://s3cret@nats.example:4222'])).toBe('nats://***@nats.example:4222');
    expect(redacted(['nats://worker:pw@10.0.0.1:4222', 'tls://n2:4222'])).toBe('nats://***@10.0.0.1:4222,tls://n2:4222');
    const leaky = redacted(['nats://worker:pa/ss@host:4222', 'nats://worker:p@ss@host:4222']);
    expect(leaky).toBe('nats://***@host:4222,nats://***@host:4222');
    expect(leaky).not.toContain('ss');
  });

  it('leaves URLs without credentials as they are', () => {
    expect(redacted(['nats://127.0.0.1:4222', 'localhost:4222'])).toBe('nats://127.0.0.1:4222,localhost:4222');
  });
});
