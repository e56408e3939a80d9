import { ShoalError } from './errors.js';

/**
 * The failure of one image item of a request, said the same way wherever it is found (the prep
 * thread decoding it, the engine fetching its URL): the message starts `image item N: ` and
 * `details.item` holds N, the item's index in the caller's request, so a caller sending 500
 * images knows which one to fix and the CLI can name the input line.
 */

const ITEM_PREFIX = /^image item \d+: /;

/** `error` as the failure of image item `index`; an item prefix it already had (another index) is replaced. */
export function imageItemError(error: ShoalError, index: number): ShoalError {
  return new ShoalError(error.code, `image item ${index}: ${itemMessage(error.message)}`, { cause: error, details: { ...error.details, item: index } });
}

/** The message without its `image item N: ` prefix. */
export function itemMessage(message: string): string {
  return message.replace(ITEM_PREFIX, '');
}
