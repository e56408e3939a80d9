import { ShoalError } from '../../adapters/protocol/errors.js';

/**
 * The ShoalError a promise rejects with, so a test can assert its code and wording; anything else
 * (fulfilment, another error type) fails the test with what happened instead.
 */
export async function rejection(promise: Promise<unknown>): Promise<ShoalError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof ShoalError) return error;
    throw new Error(`expected a ShoalError, got ${String(error)}`);
  }
  throw new Error('expected a rejection');
}
