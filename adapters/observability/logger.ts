import pino, { type Logger } from 'pino';

/**
 * Structured JSON logs (pino) on stderr, so stdout stays free for command output (JSON Lines).
 * Level: trace, debug, info, warn, error, fatal or silent (services read SHOAL_LOG_LEVEL); default info.
 */

export type { Logger };

const LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']);

export function createLogger(name: string, level: string = 'info'): Logger {
  return pino({ name, level: LEVELS.has(level) ? level : 'info', base: { service: name } }, pino.destination(2));
}
