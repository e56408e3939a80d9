import { describe, expect, it } from 'vitest';
import { listeningLine } from '../../../../services/gateway/main.js';

/** The gateway's start-up line says where it really listens: a wildcard bind is not "127.0.0.1". */
describe('shoal gateway start-up line', () => {
  it('names a wildcard bind and every interface, with the local URL beside it', () => {
    expect(listeningLine('http://127.0.0.1:8080', '0.0.0.0')).toBe('0.0.0.0:8080, every interface (http://127.0.0.1:8080 from this machine)');
    expect(listeningLine('http://[::1]:8080', '::')).toBe('[::]:8080, every interface (http://[::1]:8080 from this machine)');
  });

  it('prints the URL alone for a specific address', () => {
    expect(listeningLine('http://127.0.0.1:8080', '127.0.0.1')).toBe('http://127.0.0.1:8080');
    expect(listeningLine('http://10.0.0.5:9000', '10.0.0.5')).toBe('http://10.0.0.5:9000');
  });
});
