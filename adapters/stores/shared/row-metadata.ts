import { z } from 'zod';
import { metadataProblem, type DocumentMetadata } from '../../protocol/metadata.js';

/**
 * A row's metadata as a store gives it back: an object (pgvector's jsonb, a Qdrant payload, the
 * JSON Lines file), JSON text (LanceDB's JSON column, Chroma's metadata value) or nothing (a row
 * written before metadata, or a table without the column). Anything that is not valid metadata
 * reads as null: a hit never fails over it.
 */
export function readStoredMetadata(value: unknown): DocumentMetadata | null {
  let parsed: unknown = value;
  if (typeof value === 'string') {
    try {
      parsed = JSON.parse(value);
    } catch {
      // Not JSON: no metadata to show (never written by Shoal).
      return null;
    }
  }
  if (parsed === null || parsed === undefined || metadataProblem(parsed) !== null) return null;
  return Object.freeze({ ...(parsed as DocumentMetadata) });
}

/** The `metadata` field of a stored row, for zod shapes (shared/table-spec.ts's HitShape). */
export const StoredMetadata = z.unknown().optional().transform(readStoredMetadata);

/** A row's metadata as JSON text for stores that keep it so (null: none). */
export function metadataText(metadata: DocumentMetadata | null | undefined): string | null {
  return metadata === null || metadata === undefined ? null : JSON.stringify(metadata);
}
