/**
 * The gateway's defaults, in a file without imports so the CLI can show them in --help without
 * loading fastify or the NATS client.
 */

export const DEFAULT_GATEWAY_PORT = 8080;
/** @default 8 MiB: room for a few thousand passages per request; larger work goes to /v1/jobs. */
export const DEFAULT_BODY_LIMIT = '8MiB';
/** @default 60 s per synchronous call. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;
/** @default 30 s for in-flight requests to finish after SIGTERM. */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 30_000;
