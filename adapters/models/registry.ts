import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { causalRerankerSpec } from './causal-reranker/spec.js';
import { clipSpec } from './clip/spec.js';
import { colbertSpec } from './colbert/spec.js';
import { crossEncoderSpec } from './cross-encoder/spec.js';
import { denseSpec } from './dense/spec.js';
import type { Evidence, FamilySpec } from './family-spec.js';
import { glinerSpec } from './gliner/spec.js';
import { imageClassificationSpec } from './image-classification/spec.js';
import { ocrSpec } from './ocr/spec.js';
import { spladeSpec } from './splade/spec.js';
import { tokenClassificationSpec } from './token-classification/spec.js';

/**
 * Every model family Shoal runs: the one place a family is added. An entry pairs the family's
 * light spec (capabilities and `match`, imported here: detection and capability checks need them
 * everywhere) with a lazy loader of its full adapter (imported only by the thread that runs the
 * family: the image families pull in sharp). The `Family` type and profile.ts's enum are the keys
 * of this table, and family-loaders.ts checks at compile time that each loader returns the
 * adapter named after its key — so a new family is a folder (spec.ts + adapter) plus one entry.
 *
 * Entries are in detection order: when two families match a folder equally, the first wins.
 */
export const FAMILIES = {
  dense: { spec: denseSpec, load: async () => (await import('./dense/dense.js')).dense },
  'cross-encoder': { spec: crossEncoderSpec, load: async () => (await import('./cross-encoder/cross-encoder.js')).crossEncoder },
  'causal-reranker': {
    spec: causalRerankerSpec,
    load: async () => (await import('./causal-reranker/causal-reranker.js')).causalReranker,
  },
  splade: { spec: spladeSpec, load: async () => (await import('./splade/splade.js')).splade },
  colbert: { spec: colbertSpec, load: async () => (await import('./colbert/colbert.js')).colbert },
  gliner: { spec: glinerSpec, load: async () => (await import('./gliner/gliner.js')).gliner },
  'token-classification': {
    spec: tokenClassificationSpec,
    load: async () => (await import('./token-classification/token-classification.js')).tokenClassification,
  },
  ocr: { spec: ocrSpec, load: async () => (await import('./ocr/ocr.js')).ocr },
  clip: { spec: clipSpec, load: async () => (await import('./clip/clip.js')).clip },
  'image-classification': {
    spec: imageClassificationSpec,
    load: async () => (await import('./image-classification/image-classification.js')).imageClassification,
  },
} satisfies Record<string, { spec: FamilySpec; load: () => Promise<{ readonly name: string }> }>;

export type Family = keyof typeof FAMILIES;

/** Family names in detection order (the values of profile.ts's `Family` enum). */
export const FAMILY_NAMES = Object.keys(FAMILIES) as [Family, ...Family[]];

/** What the main thread knows of a family without loading it. */
export interface FamilyInfo extends FamilySpec {
  readonly name: Family;
}

const INFOS: ReadonlyMap<string, FamilyInfo> = new Map(
  FAMILY_NAMES.map((name): [Family, FamilyInfo] => [name, Object.freeze({ name, ...FAMILIES[name].spec })]),
);

export function allFamilies(): readonly FamilyInfo[] {
  return [...INFOS.values()];
}

/** A family's spec (capabilities, match); its adapter is loaded with family-loaders.ts loadFamily. */
export function getFamily(name: Family): FamilyInfo {
  const info = INFOS.get(name);
  if (info === undefined) {
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `model family "${name}" is not available in this build`);
  }
  return info;
}

/** The family whose match score is highest, or null when none recognizes the folder. */
export function detectFamily(evidence: Evidence): FamilyInfo | null {
  let best: FamilyInfo | null = null;
  let bestScore = 0;
  for (const info of INFOS.values()) {
    const score = info.match(evidence);
    if (score > bestScore) {
      best = info;
      bestScore = score;
    }
  }
  return best;
}

