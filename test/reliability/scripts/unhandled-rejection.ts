import { createLogger } from '../../../adapters/observability/logger.js';
import { logUnhandledRejections } from '../../../adapters/observability/unhandled-rejections.js';

/**
 * A process that installs the services' unhandled-rejection handler, then lets a promise reject
 * with no one to catch it. It prints `still running` once the rejection has been reported
 * (Node reports them after the microtask queue drains, before timers run), then exits 0.
 */
logUnhandledRejections(createLogger('probe'));
void Promise.reject(new Error('probe rejection nobody handles'));
setTimeout(() => {
  process.stdout.write('still running\n');
  process.exit(0);
}, 50);
