import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { int64Tensor } from '../../runtime/tensors.js';
import { ort } from '../../runtime/ort-session.js';
import type { PastInput } from '../kv-cache.js';
import type { PreparedText } from '../family.js';
import type { ModelProfile, PositionRule } from '../profile.js';

/**
 * Pads a batch of tokenized texts into the tensors a text graph takes. Which tensors are built
 * follows the graph's own input names: token_type_ids only if it has them, position_ids with the
 * model type's rule (BERT arange, RoBERTa padding_idx+1.., decoders cumsum(mask)-1).
 */

export interface TextBatch {
  batchSize: number;
  seqLen: number;
  /** Row-major [batch, seq] ids and mask, padded on the tokenizer's side. */
  ids: Int32Array;
  mask: Uint8Array;
  /** Column of each row's first real token (non-zero with left padding). */
  rowStart: Int32Array;
  feeds: Record<string, ort.Tensor>;
}

export interface CollateOptions {
  padId: number;
  paddingSide: 'left' | 'right';
  positionRule: PositionRule;
  /** RoBERTa's padding_idx (config pad_token_id). */
  positionPadIdx: number;
  /** Pad to at least this many columns (ColBERT queries are fixed-length). */
  minLength?: number;
  /** KV-cache inputs of a decoder graph, fed empty (kv-cache.ts). */
  past?: readonly PastInput[];
}

export function collateOptionsFor(profile: ModelProfile, positionPadIdx: number): CollateOptions {
  const facts = profile.tokenizer;
  if (facts === null) throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${profile.id}: text model without tokenizer facts`);
  return { padId: facts.padId, paddingSide: facts.paddingSide, positionRule: profile.positionRule, positionPadIdx, past: profile.pastInputs };
}

/** An empty past tensor: no element, so nothing to allocate whatever the batch. */
function emptyPast(input: PastInput, batchSize: number): ort.Tensor {
  const dims = [batchSize, input.heads, 0, input.headDim];
  return input.dtype === 'float16' ? new ort.Tensor('float16', new Uint16Array(0), dims) : new ort.Tensor('float32', new Float32Array(0), dims);
}


function positionIds(batch: TextBatch, rule: PositionRule, padIdx: number): BigInt64Array {
  const { batchSize, seqLen, mask } = batch;
  const out = new BigInt64Array(batchSize * seqLen);
  for (let b = 0; b < batchSize; b++) {
    let seen = 0;
    for (let t = 0; t < seqLen; t++) {
      const i = b * seqLen + t;
      const real = mask[i] === 1;
      if (real) seen++;
      switch (rule) {
        case 'arange':
          out[i] = BigInt(t);
          break;
        case 'roberta':
          out[i] = BigInt(real ? padIdx + seen : padIdx);
          break;
        case 'cumsum':
          out[i] = BigInt(real ? seen - 1 : 1);
          break;
      }
    }
  }
  return out;
}

export function collateText(items: readonly PreparedText[], inputNames: readonly string[], options: CollateOptions): TextBatch {
  const batchSize = items.length;
  let seqLen = options.minLength ?? 0;
  for (const item of items) seqLen = Math.max(seqLen, item.ids.length);
  seqLen = Math.max(seqLen, 1);
  const ids = new Int32Array(batchSize * seqLen).fill(options.padId);
  const mask = new Uint8Array(batchSize * seqLen);
  const types = new BigInt64Array(batchSize * seqLen);
  const rowStart = new Int32Array(batchSize);
  items.forEach((item, b) => {
    const offset = options.paddingSide === 'left' ? seqLen - item.ids.length : 0;
    rowStart[b] = offset;
    for (let t = 0; t < item.ids.length; t++) {
      const i = b * seqLen + offset + t;
      ids[i] = item.ids[t] ?? options.padId;
      mask[i] = item.attention === null ? 1 : (item.attention[t] ?? 1) === 1 ? 1 : 0;
      types[i] = BigInt(item.typeIds?.[t] ?? 0);
    }
  });
  const batch: TextBatch = { batchSize, seqLen, ids, mask, rowStart, feeds: {} };
  const dims = [batchSize, seqLen];
  const feeds: Record<string, ort.Tensor> = {};
  for (const name of inputNames) {
    switch (name) {
      case 'input_ids':
        feeds[name] = int64Tensor(BigInt64Array.from(ids, (v) => BigInt(v)), dims);
        break;
      case 'attention_mask':
        feeds[name] = int64Tensor(BigInt64Array.from(mask, (v) => BigInt(v)), dims);
        break;
      case 'token_type_ids':
        feeds[name] = int64Tensor(types, dims);
        break;
      case 'position_ids':
        feeds[name] = int64Tensor(positionIds(batch, options.positionRule, options.positionPadIdx), dims);
        break;
      default: {
        const past = options.past?.find((input) => input.name === name);
        if (past !== undefined) feeds[name] = emptyPast(past, batchSize);
        // Unknown inputs are reported by runChecked with the graph's full list.
        break;
      }
    }
  }
  batch.feeds = feeds;
  return batch;
}
