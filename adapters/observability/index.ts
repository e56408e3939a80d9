export { ShoalMetrics } from './metrics.js';
export type { ShoalMetricsOptions } from './metrics.js';
export { createLogger } from './logger.js';
export type { Logger } from './logger.js';
