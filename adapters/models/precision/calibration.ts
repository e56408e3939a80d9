import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { ort } from '../../runtime/ort-session.js';
import { collateOptionsFor, collateText } from '../text/collate.js';
import type { PreparedText } from '../family.js';
import { collateGliner, type GlinerRow } from '../gliner/gliner-input.js';
import { positionPadIdx } from '../model-types.js';
import type { ModelProfile } from '../profile.js';

/**
 * Calibration inputs for the int8 fidelity check, built in the model thread without a tokenizer:
 * a few fixed pseudo-random token-id sequences of different lengths (so padding is exercised),
 * drawn from the middle of the vocabulary (ordinary word pieces, away from special and unused
 * ids), collated exactly as the families collate real batches (padding side, position-id rule,
 * GLiNER's span inputs). Same model → same inputs, so a measured fidelity can be cached.
 */

/** Changes whenever the inputs below change: cached fidelity measurements are then redone. */
export const CALIBRATION_VERSION = 'synthetic-ids/1';

const LENGTHS = [6, 13, 24, 41, 64, 9];
/** Used when the graph's embedding table could not be found. */
const FALLBACK_VOCAB = 1000;
const TEXT_INPUTS = new Set(['input_ids', 'attention_mask', 'token_type_ids', 'position_ids']);
const GLINER_INPUTS = new Set([...TEXT_INPUTS, 'words_mask', 'text_lengths', 'span_idx', 'span_mask']);

const GlinerMarkers = z.looseObject({
  entTokenId: z.number().int().nonnegative(),
  sepTokenId: z.number().int().nonnegative(),
  maxWidth: z.number().int().positive().default(12),
});

export interface CalibrationBatch {
  feeds: Record<string, ort.Tensor>;
  batchSize: number;
  seqLen: number;
  /** Row-major [batch, seq]: 1 where a token is real (outputs at padding are not compared). */
  mask: Uint8Array;
}

/** A deterministic id stream (Park–Miller), independent of any global random state. */
function idStream(low: number, high: number): () => number {
  let state = 48_271;
  return () => {
    state = (state * 48_271) % 2_147_483_647;
    return low + (state % Math.max(1, high - low));
  };
}

/** Ids from a quarter of the vocabulary (at most 1000) up to 90 %: past specials, unused slots and trailing added tokens. */
function idRange(vocab: number): [number, number] {
  const low = Math.min(1000, Math.floor(vocab / 4));
  return [low, Math.max(low + 1, Math.floor(vocab * 0.9))];
}

function lengthsFor(profile: ModelProfile, reserve: number): number[] {
  const longest = Math.max(2, profile.maxLength - reserve);
  return LENGTHS.map((length) => Math.min(length, longest));
}

function textBatch(profile: ModelProfile, inputNames: readonly string[], vocab: number): CalibrationBatch {
  const [low, high] = idRange(vocab);
  const next = idStream(low, high);
  const items: PreparedText[] = lengthsFor(profile, 0).map((length) => {
    const ids = Array.from({ length }, next);
    return { kind: 'text', ids, typeIds: null, attention: null, truncated: false, length, promptTokens: 0, role: 'document' };
  });
  const batch = collateText(items, inputNames, collateOptionsFor(profile, positionPadIdx(profile)));
  return { feeds: batch.feeds, batchSize: batch.batchSize, seqLen: batch.seqLen, mask: batch.mask };
}

/** GLiNER rows: a two-label prompt (<<ENT>> label <<ENT>> label <<SEP>>) followed by one-token words. */
function glinerBatch(profile: ModelProfile, vocab: number): CalibrationBatch {
  const markers = GlinerMarkers.safeParse(profile.options);
  if (!markers.success || profile.tokenizer === null) {
    throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${profile.id}: span inputs need the GLiNER marker token ids in the profile options`);
  }
  const { entTokenId, sepTokenId, maxWidth } = markers.data;
  const [low, high] = idRange(vocab);
  const next = idStream(low, high);
  const rows: GlinerRow[] = lengthsFor(profile, 5).map((words) => {
    const prompt = [entTokenId, next(), entTokenId, next(), sepTokenId];
    const ids = [...prompt, ...Array.from({ length: words }, next)];
    const wordsMask = [...prompt.map(() => 0), ...Array.from({ length: words }, (_, w) => w + 1)];
    return { ids, wordsMask, wordCount: words };
  });
  const batch = collateGliner(rows, profile.tokenizer.padId, maxWidth);
  const seqLen = Math.max(...rows.map((row) => row.ids.length));
  const mask = new Uint8Array(rows.length * seqLen);
  rows.forEach((row, b) => mask.fill(1, b * seqLen, b * seqLen + row.ids.length));
  return { feeds: batch.feeds, batchSize: rows.length, seqLen, mask };
}

/**
 * The calibration batch for a graph with these inputs. Throws when the graph takes an input
 * this module cannot synthesize (the fidelity check then cannot pass, and fp32 is used).
 */
export function calibrationBatch(profile: ModelProfile, inputNames: readonly string[], vocab: number | null): CalibrationBatch {
  const rows = vocab ?? FALLBACK_VOCAB;
  const span = inputNames.includes('span_idx');
  const known = span ? GLINER_INPUTS : TEXT_INPUTS;
  // A decoder's KV-cache inputs are fed empty by the collation, as in every real batch.
  const past = new Set(profile.pastInputs.map((input) => input.name));
  const unknown = inputNames.filter((name) => !known.has(name) && !past.has(name));
  if (unknown.length > 0 || !inputNames.includes('input_ids')) {
    throw new ShoalError(
      ErrorCode.MODEL_LOAD_FAILED,
      `${profile.id}: no calibration inputs for a graph with inputs [${inputNames.join(', ')}]${unknown.length > 0 ? ` (unknown: ${unknown.join(', ')})` : ''}`,
    );
  }
  if (profile.tokenizer === null) throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${profile.id}: calibration inputs need the tokenizer facts`);
  return span ? glinerBatch(profile, rows) : textBatch(profile, inputNames, rows);
}
