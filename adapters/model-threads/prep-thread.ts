import { workerData } from 'node:worker_threads';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { serveThread, type HandlerResult } from '../support/thread-rpc.js';
import { ImagePolicy, readImageInput, type ImageInput } from '../sources/image-input.js';
import { EncodingCache } from '../tokenizers/batch-encode.js';
import { TextTokenizer } from '../tokenizers/text-tokenizer.js';
import { describeModel } from '../models/detect.js';
import type { PrepContext } from '../models/family.js';
import type { ModelProfile } from '../models/profile.js';
import { loadFamily } from '../models/family-loaders.js';
import { attachCache } from '../models/text/text-prep.js';
import type { PrepRequest, PrepResponse, TokenizedOutput } from './thread-messages.js';

/**
 * Prep thread: model detection, tokenization and other input preparation, off the main thread
 * and overlapping with inference in the model threads. Tokenizers are kept per model folder,
 * least recently used first out.
 */

const MAX_TOKENIZERS = 32;
const tokenizers = new Map<string, TextTokenizer>();

function remember(dir: string, tokenizer: TextTokenizer): TextTokenizer {
  tokenizers.delete(dir);
  tokenizers.set(dir, tokenizer);
  attachCache(tokenizer, new EncodingCache());
  while (tokenizers.size > MAX_TOKENIZERS) {
    const oldest = tokenizers.keys().next();
    if (oldest.done === true) break;
    tokenizers.delete(oldest.value);
  }
  return tokenizer;
}

async function tokenizerFor(profile: ModelProfile): Promise<TextTokenizer> {
  const known = tokenizers.get(profile.dir);
  if (known !== undefined) {
    tokenizers.delete(profile.dir);
    tokenizers.set(profile.dir, known);
    return known;
  }
  const overrides: Record<string, unknown> = profile.tokenizer === null ? {} : { padding_side: profile.tokenizer.paddingSide };
  return remember(profile.dir, await TextTokenizer.load(profile.dir, overrides));
}

// From workerData, or, for a thread started early (early-threads.ts), from its first request.
let imagePolicy: ImagePolicy | null = z.object({ imagePolicy: ImagePolicy }).nullable().parse(workerData ?? null)?.imagePolicy ?? null;

function policy(): ImagePolicy {
  if (imagePolicy === null) throw new ShoalError(ErrorCode.INTERNAL, 'the prep thread has no image policy yet');
  return imagePolicy;
}

function readImage(image: ImageInput): Promise<Uint8Array> {
  return readImageInput(image, policy());
}

async function context(profile: ModelProfile): Promise<PrepContext> {
  const tokenizer = profile.tokenizer === null ? null : await tokenizerFor(profile);
  return { profile, tokenizer, readImage, maxImagePixels: policy().maxPixels };
}

async function handle(message: PrepRequest): Promise<HandlerResult<PrepResponse>> {
  switch (message.type) {
    case 'configure':
      imagePolicy = ImagePolicy.parse(message.imagePolicy);
      return { body: { type: 'configured' } };
    case 'describe': {
      const described = await describeModel(message.id, message.dir, message.overrides);
      if (described.tokenizer !== null) remember(message.dir, described.tokenizer);
      return { body: { type: 'described', profile: described.profile } };
    }
    case 'prepare': {
      const family = await loadFamily(message.profile.family);
      const items = await family.prepare(await context(message.profile), message.request);
      return { body: { type: 'prepared', items } };
    }
    case 'tokenize': {
      const ctx = await context(message.profile);
      const tokenizer = ctx.tokenizer;
      if (tokenizer === null) {
        throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `model ${message.profile.id} reads no text; there is nothing to tokenize`);
      }
      const family = await loadFamily(message.profile.family);
      const prepared = await family.prepare(ctx, { ...message.request, exactLength: true });
      const items = prepared.map((item): TokenizedOutput => {
        if (item.kind === 'image') throw new ShoalError(ErrorCode.INVALID_INPUT, 'tokenize takes text items only');
        return {
          ids: item.ids,
          tokens: item.ids.map((id) => tokenizer.idToToken(id) ?? ''),
          truncated: item.truncated,
          length: item.length,
        };
      });
      return { body: { type: 'tokenized', items } };
    }
    case 'forget':
      tokenizers.delete(message.dir);
      return { body: { type: 'forgotten' } };
    default:
      throw new ShoalError(ErrorCode.INTERNAL, 'unknown prep request');
  }
}

serveThread<PrepRequest, PrepResponse>(handle);
