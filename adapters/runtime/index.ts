export { spawnThread, siblingModule } from './spawn.js';
export { ThreadClient, serveThread } from './thread-rpc.js';
export type { HandlerResult, ThreadClientOptions } from './thread-rpc.js';
export {
  ExecutionProvider,
  GraphOptimization,
  RuntimeOptions,
  createSession,
  describeInputs,
  describeOutputs,
  resolveRuntimeOptions,
  ort,
} from './ort-session.js';
export type { CreatedSession, IoInfo, RuntimeOptionsInput } from './ort-session.js';
export { boolTensor, float32Tensor, floatOutput, int64Tensor, runChecked } from './tensors.js';
export type { FloatTensor } from './tensors.js';
