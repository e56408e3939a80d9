import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { colbert } from './colbert.js';
import { clip } from './clip.js';
import { crossEncoder } from './cross-encoder.js';
import { dense } from './dense.js';
import type { Evidence, FamilyAdapter } from './family.js';
import { gliner } from './gliner.js';
import { imageClassification } from './image-classification.js';
import { ocr } from './ocr.js';
import type { Family } from './profile.js';
import { splade } from './splade.js';
import { tokenClassification } from './token-classification.js';

/**
 * Every model family Shoal runs, one adapter each. Adding a family = one adapter file, one line
 * here and one conformance case.
 */
const ADAPTERS: readonly FamilyAdapter[] = Object.freeze([
  dense,
  crossEncoder,
  splade,
  colbert,
  gliner,
  tokenClassification,
  ocr,
  clip,
  imageClassification,
]);

const BY_NAME = new Map<Family, FamilyAdapter>(ADAPTERS.map((adapter) => [adapter.name, adapter]));

export function allFamilies(): readonly FamilyAdapter[] {
  return ADAPTERS;
}

export function getFamily(name: Family): FamilyAdapter {
  const adapter = BY_NAME.get(name);
  if (adapter === undefined) {
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `model family "${name}" is not available in this build`);
  }
  return adapter;
}

/** The family whose match score is highest, or null when none recognizes the folder. */
export function detectFamily(evidence: Evidence): FamilyAdapter | null {
  let best: FamilyAdapter | null = null;
  let bestScore = 0;
  for (const adapter of ADAPTERS) {
    const score = adapter.match(evidence);
    if (score > bestScore) {
      best = adapter;
      bestScore = score;
    }
  }
  return best;
}
