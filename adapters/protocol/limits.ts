/**
 * Input size limits enforced by the request schemas. They protect every entry point (library,
 * CLI, HTTP, NATS) from inputs that would exhaust memory; services may lower them further.
 */
export const DEFAULT_LIMITS = Object.freeze({
  /** Items in one encode/score/extract request. Larger requests are split by the scheduler, not rejected, up to this. */
  maxItemsPerRequest: 100_000,
  /** Characters in one text item. Texts are truncated to the model's token limit after tokenization. */
  maxTextChars: 1_000_000,
  /** Labels in one zero-shot extract request. */
  maxLabels: 256,
  /** Characters in one label or prompt. */
  maxLabelChars: 512,
  /** Characters of an instruction or literal prompt. */
  maxPromptChars: 8_192,
  /** Characters in an item id. */
  maxIdChars: 512,
  /** Upper bound for a per-request max_length override (tokens). */
  maxSequenceLength: 32_768,
  /** Bytes of one image item (decoded). */
  maxImageBytes: 32 * 1024 * 1024,
  /**
   * Parts of one job. A part holds at least one item, so a job never needs more parts than
   * maxItemsPerRequest; the bound also caps what a part's number costs a worker (the status
   * bitmap of counted parts is parts/8 bytes: 12.5 KB here, where 2^35 would be 4 GiB).
   */
  maxJobParts: 100_000,
  /** Best-k of a score or extract request: never more than the items it ranks. */
  maxTopK: 100_000,
});

/**
 * Bytes of one document an ingest reads (a file, an `s3://`, `obj://` or `file://` source): the
 * parse stage's `maxBytes` default, and the most a gateway reads for a POST /v1/ingest source
 * whatever a request's definition asks. One number, so the size a document is refused at is the
 * same on every path (docs/ingest.md, docs/security.md). 100 MiB.
 */
export const MAX_DOCUMENT_BYTES = 100 * 1024 * 1024;
