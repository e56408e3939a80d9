import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { serveThread } from '../../../adapters/support/thread-rpc.js';

/** A thread for runtime tests: echoes, fails with a ShoalError, or dies mid-request. */
type Request = { op: 'echo'; value: number } | { op: 'fail' } | { op: 'die' } | { op: 'slow'; ms: number };

serveThread<Request, number>(async (request) => {
  switch (request.op) {
    case 'echo':
      return { body: request.value };
    case 'fail':
      throw new ShoalError(ErrorCode.INVALID_INPUT, 'bad value', { details: { field: 'value' } });
    case 'die':
      process.exit(3);
      break;
    case 'slow':
      await new Promise((resolve) => setTimeout(resolve, request.ms));
      return { body: request.ms };
  }
  return { body: -1 };
});
