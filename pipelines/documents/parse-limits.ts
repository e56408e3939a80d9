import { DEFAULT_PARSE_OPTIONS, type ParseOptions } from './document.js';

/**
 * A parse worker's own ceilings on what a parse task may ask for. A task's settings come from
 * whoever started the ingest run (`POST /v1/ingest`, `shoal ingest --nats`): a request could
 * raise `maxPages` to 1,000,000, `maxBytes` to 1 TiB or the OCR resolution to 600 dpi (16× the
 * pixels of the default), and the worker took it. Each is now the lower of the task's and the
 * worker's (SHOAL_PARSE_MAX_PAGES, SHOAL_PARSE_MAX_BYTES, SHOAL_PARSE_MAX_DPI).
 */
export interface ParseLimits {
  /** @default 5000 (the pipeline default) */
  maxPages: number;
  /** @default 100 MiB (the pipeline default) */
  maxBytes: number;
  /** @default 300 */
  maxDpi: number;
}

export const DEFAULT_PARSE_LIMITS: Readonly<ParseLimits> = Object.freeze({ maxPages: DEFAULT_PARSE_OPTIONS.maxPages, maxBytes: DEFAULT_PARSE_OPTIONS.maxBytes, maxDpi: 300 });

type Capped = Pick<ParseOptions, 'maxPages' | 'maxBytes' | 'ocrDpi'>;

/** `requested` with each limit lowered to the worker's; other settings untouched. */
export function capParseSettings<T extends Capped>(requested: T, limits: Readonly<Partial<ParseLimits>> = {}): T {
  const ceiling = { ...DEFAULT_PARSE_LIMITS, ...limits };
  return {
    ...requested,
    maxPages: Math.min(requested.maxPages, ceiling.maxPages),
    maxBytes: Math.min(requested.maxBytes, ceiling.maxBytes),
    ocrDpi: Math.min(requested.ocrDpi, ceiling.maxDpi),
  };
}
