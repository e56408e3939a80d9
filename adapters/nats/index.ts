export {
  connectNats,
  natsSettingsFromEnv,
  resolveNatsSettings,
  NatsConnectionSettings,
  DEFAULT_NATS_URL,
} from './connection.js';
export type { NatsConnectionSettingsInput, ConnectNatsOptions } from './connection.js';
export {
  ensureTopology,
  ensureJobConsumer,
  advisoryNames,
  resolveTopologySettings,
  resolveConsumerSettings,
  TopologySettings,
  ConsumerSettings,
} from './topology.js';
export type { Topology, TopologySettingsInput, ConsumerSettingsInput } from './topology.js';
export { NatsEngine } from './engine-client.js';
export type { NatsEngineOptions, RpcCall, RpcRoute } from './engine-client.js';
export { JobsClient, DEFAULT_PART_ITEMS } from './jobs-client.js';
export type { JobsClientOptions, WaitOptions, ResolvedPartResult } from './jobs-client.js';
export { StatusStore, TERMINAL_STATES, bitmapHas, bitmapSet, initialStatus } from './status-store.js';
export type { PartRecord, PartOutcome } from './status-store.js';
export { PayloadStore, getJson } from './payloads.js';
export type { PayloadStoreOptions } from './payloads.js';
export { RpcServer } from './rpc-server.js';
export type { Route, RpcServerOptions } from './rpc-server.js';
export { JobConsumer } from './job-consumer.js';
export type { JobConsumerOptions, PulledRoute } from './job-consumer.js';
export { PartHandler } from './part-handler.js';
export type { Disposition, ModelState, PartHandlerOptions } from './part-handler.js';
export { PartResults } from './part-results.js';
export type { PartResultsOptions } from './part-results.js';
export { DeadLetters, deadSourceOf } from './dead-letter.js';
export type { DeadLettersOptions, DeadSource } from './dead-letter.js';
export { toNatsShoalError } from './nats-errors.js';
export { RPC_HEADERS } from './rpc-wire.js';
