import { Writable } from 'node:stream';
import pino from 'pino';
import { z } from 'zod';

/** A pino logger (level info) whose JSON lines a test reads back, each parsed as an object. */
export function capturingLogger(): { logger: pino.Logger; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk.toString('utf8'));
      done();
    },
  });
  return {
    logger: pino({ level: 'info' }, stream),
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => z.record(z.string(), z.unknown()).parse(JSON.parse(line))),
  };
}
