/**
 * `shoal/clients`: talking to Shoal workers over NATS from another program — the Engine
 * interface over request-reply (`NatsEngine`) and asynchronous jobs over JetStream
 * (`JobsClient`), on a connection made by `connectNats` (NATS_* settings as the services use them).
 */

export { connectNats, resolveNatsSettings } from '../../adapters/nats/connection/connection.js';
export type { NatsConnectionSettings, NatsConnectionSettingsInput } from '../../adapters/nats/connection/connection.js';
export { NatsEngine } from '../../adapters/nats/rpc/engine-client.js';
export { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
export type { JobsClientOptions, WaitOptions } from '../../adapters/nats/jobs/jobs-client.js';
