import { SETTINGS } from '../settings/table.js';

/**
 * The gateway's defaults (from the settings table), in a file that loads neither fastify nor the
 * NATS client, so the CLI can show them in --help cheaply.
 */

/** @default 127.0.0.1: loopback unless the operator binds elsewhere (and then should set API tokens). */
export const DEFAULT_GATEWAY_HOST = SETTINGS.host.default;
export const DEFAULT_GATEWAY_PORT = SETTINGS.port.default;
/** @default 8 MiB: room for a few thousand passages per request; larger work goes to /v1/jobs. */
export const DEFAULT_BODY_LIMIT = SETTINGS.bodyLimit.default;
/** @default 60 s per synchronous call. */
export const DEFAULT_REQUEST_TIMEOUT_MS = SETTINGS.requestTimeoutMs.default;
/** @default 30 s for in-flight requests to finish after SIGTERM. */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = SETTINGS.shutdownTimeoutMs.default;
export const DEFAULT_DRAIN_DELAY_MS = SETTINGS.drainDelayMs.default;
