import { ErrorCode, ShoalError, toShoalError } from '../../adapters/protocol/errors.js';
import { imageItemError } from '../../adapters/protocol/item-errors.js';
import { isImageItem, type Item, type Role } from '../../adapters/protocol/requests.js';
import type { PrepItem } from '../../adapters/models/family.js';
import type { ModelProfile } from '../../adapters/models/profile.js';
import { getFamily } from '../../adapters/models/registry.js';
import { checkImageSource, ImageFetcher, type ImagePolicy } from '../../adapters/sources/image-input.js';
import { promptFor, type PromptChoice } from './prompts.js';

/**
 * Request items → prep items, the step before tokenization: prompts for text (per role), image
 * sources checked against the image policy and URLs fetched, items the model cannot read refused
 * by name. URL images are fetched on the engine's thread, a few per host at a time, not in the
 * prep thread: a slow host then delays only the request that named it.
 */
export class RequestItems {
  readonly #policy: ImagePolicy;
  readonly #fetcher = new ImageFetcher();

  constructor(policy: ImagePolicy) {
    this.#policy = policy;
  }

  async prepare(
    profile: ModelProfile,
    items: readonly Item[],
    defaultRole: Role | undefined,
    choice: PromptChoice | null,
    signal?: AbortSignal,
  ): Promise<PrepItem[]> {
    const inputs = getFamily(profile.family).capabilities.inputs ?? ['text'];
    const prompts = new Map<Role | 'none', string>();
    const out: PrepItem[] = [];
    const fetches: Promise<void>[] = [];
    for (const [index, item] of items.entries()) {
      const role = item.role ?? defaultRole;
      if (isImageItem(item)) {
        if (!inputs.includes('image')) {
          throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `model ${profile.id} (${profile.family}) reads text, not images`);
        }
        const prepItem: PrepItem = { text: '', image: await checkImageSource(item.image, this.#policy), role: role ?? 'document' };
        out.push(prepItem);
        if (prepItem.image?.kind === 'url') fetches.push(this.#fetchImage(prepItem, index, signal));
        continue;
      }
      if (!inputs.includes('text')) {
        throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `model ${profile.id} (${profile.family}) reads images, not text`);
      }
      const key = role ?? 'none';
      let prompt = prompts.get(key);
      if (prompt === undefined) {
        prompt = choice === null ? '' : promptFor(profile, role, choice);
        prompts.set(key, prompt);
      }
      out.push(prompt === '' ? { text: item.text, role: role ?? 'document' } : { text: prompt + item.text, role: role ?? 'document', prompt });
    }
    if (fetches.length > 0) {
      const settled = await Promise.allSettled(fetches);
      const failed = settled.find((result) => result.status === 'rejected');
      if (failed !== undefined) throw failed.reason;
    }
    return out;
  }

  /** Replaces a checked image URL by its bytes (errors named by item, as the prep thread names them). */
  async #fetchImage(item: PrepItem, index: number, signal: AbortSignal | undefined): Promise<void> {
    if (item.image?.kind !== 'url') return;
    try {
      item.image = { kind: 'bytes', bytes: await this.#fetcher.fetch(item.image.url, this.#policy, signal) };
    } catch (error) {
      throw imageItemError(toShoalError(error), index);
    }
  }
}
