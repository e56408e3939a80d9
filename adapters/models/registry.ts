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
 * Every model family Shoal runs, by its light spec (capabilities and `match`: detection and
 * capability checks need them everywhere, so a spec imports no runtime, tokenizer or image code).
 * The `Family` type and profile.ts's enum are the keys of this table. Each family's heavy adapter
 * is loaded on demand by family-loaders.ts, whose table must name every key here (a compile
 * error otherwise): the lazy loaders live there and not here because an adapter imports
 * profile.ts, which imports this table — with both in one file that is an import circle.
 * A new family is a folder (spec.ts + adapter), one entry here and one loader there.
 *
 * Entries are in detection order: when two families match a folder equally, the first wins.
 */
export const FAMILIES = {
  dense: denseSpec,
  'cross-encoder': crossEncoderSpec,
  'causal-reranker': causalRerankerSpec,
  splade: spladeSpec,
  colbert: colbertSpec,
  gliner: glinerSpec,
  'token-classification': tokenClassificationSpec,
  ocr: ocrSpec,
  clip: clipSpec,
  'image-classification': imageClassificationSpec,
} satisfies Record<string, FamilySpec>;

export type Family = keyof typeof FAMILIES;

/** Family names in detection order (the values of profile.ts's `Family` enum). */
export const FAMILY_NAMES = Object.keys(FAMILIES) as [Family, ...Family[]];

/** What the main thread knows of a family without loading it. */
export interface FamilyInfo extends FamilySpec {
  readonly name: Family;
}

const INFOS: ReadonlyMap<string, FamilyInfo> = new Map(
  FAMILY_NAMES.map((name): [Family, FamilyInfo] => [name, Object.freeze({ name, ...FAMILIES[name] })]),
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

