import { open, stat } from 'node:fs/promises';
import { basename, dirname, extname, isAbsolute, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { ErrorCode, isShoalError, ShoalError } from '../../adapters/protocol/errors.js';
import { MAX_DOCUMENT_BYTES } from '../../adapters/protocol/limits.js';
import { uriScheme } from '../../adapters/stores/shared/uri-parts.js';
import { Dimensions, EmbeddingDtype } from '../../adapters/protocol/output-types.js';

/**
 * A document pipeline definition: parse → chunk → encode → extract? → classify? → write, as a
 * YAML or JSON file. Every stage is a strict object (a misspelt key fails instead of being
 * ignored); defaults are filled here so `shoal pipelines show` prints exactly what will run.
 */

export const ParseStage = z.strictObject({
  /** Per page: `auto` OCRs pages without a usable text layer (or mostly images); images are always OCR'd. */
  ocr: z.enum(['auto', 'always', 'never']).default('auto'),
  /** The OCR model (built-in PaddleOCR by default). */
  ocrModel: z.string().min(1).default('paddleocr/pp-ocrv4'),
  /** Resolution pages are rendered at for OCR. */
  ocrDpi: z.number().int().min(36).max(600).default(150),
  /**
   * PDF page furniture (page numbers, running heads and feet, margin stamps at a page's top or
   * bottom edge; adapters/documents/page-furniture.ts): `drop` leaves it out of the text, `keep`
   * indexes every line.
   */
  furniture: z.enum(['drop', 'keep']).default('drop'),
  /** A larger document fails alone with DOCUMENT_TOO_LARGE. */
  maxBytes: z.number().int().positive().default(MAX_DOCUMENT_BYTES),
  maxPages: z.number().int().positive().default(5000),
});

/** The overlap when none is given: 32 tokens, or a quarter of a chunk smaller than 128 tokens. */
const DEFAULT_OVERLAP = 32;

/** A table name every backend takes (Chroma's collections and Postgres identifiers bound it). */
export const TableName = z.string().regex(/^[A-Za-z0-9_-]{1,48}$/, "1 to 48 letters, digits, '_' or '-'");

export const ChunkStage = z
  .strictObject({
    /** Chunk size in the encoder's tokens (special tokens not counted). */
    size: z.number().int().min(8).max(8192).default(200),
    /** Tokens repeated from the end of one chunk at the start of the next (whole sentences only). @default min(32, size / 4) */
    overlap: z.number().int().min(0).max(4096).optional(),
  })
  // `{size: 16}` alone must not fail on an overlap the user never wrote.
  .transform(({ size, overlap }) => ({ size, overlap: overlap ?? Math.min(DEFAULT_OVERLAP, Math.floor(size / 4)) }))
  .refine((stage) => stage.overlap < stage.size, { message: 'overlap must be smaller than size', path: ['overlap'] });

/**
 * A second, sparse encoding of every chunk (a SPLADE model): stored beside the dense vector, and
 * `shoal search` fuses the dense and sparse rankings (reciprocal rank fusion) when both exist.
 */
export const SparseEncode = z.strictObject({
  /** Sparse (SPLADE-family) model: catalog name, hub id or local folder. */
  model: z.string().min(1),
});

/**
 * Token vectors of every chunk (a ColBERT model), stored where the index has multi-vectors
 * (LanceDB, Qdrant); search rescores its dense/sparse candidates by late interaction (MaxSim).
 */
export const MultivectorEncode = z.strictObject({
  /** Multi-vector (ColBERT-family) model: catalog name, hub id or local folder. */
  model: z.string().min(1),
});

export const EncodeStage = z.strictObject({
  /** Dense embedding model: catalog name, hub id or local folder. */
  model: z.string().min(1).default('sentence-transformers/all-MiniLM-L6-v2'),
  /** Vector distance of the index table. */
  distance: z.enum(['cosine', 'l2', 'dot']).default('cosine'),
  /** L2-normalize vectors (default: the model's own configuration). */
  normalize: z.boolean().optional(),
  /**
   * Output type of the stored vectors (float16, int8, uint8, binary, ubinary; absent: float32),
   * recorded in the index spec; search converts its query the same way (docs/ingest.md).
   */
  dtype: EmbeddingDtype.optional(),
  /** Matryoshka: keep the first N dimensions, normalized again when the model normalizes; recorded in the index spec. */
  dimensions: Dimensions.optional(),
  /** Also encode every chunk with a sparse model (absent: dense only). */
  sparse: SparseEncode.optional(),
  /** Also store every chunk's token vectors for late-interaction rescoring (absent: none). */
  multivector: MultivectorEncode.optional(),
});

export const ExtractStage = z.strictObject({
  /** Entity model (GLiNER zero-shot or a token-classification model). */
  model: z.string().min(1),
  /** Entity types for zero-shot models. */
  labels: z.array(z.string().min(1)).min(1).max(256).optional(),
  threshold: z.number().min(0).max(1).default(0.5),
});

export const ClassifyStage = z.strictObject({
  /** Labels given to chunks whose embedding is close enough to the label's embedding. */
  labels: z.array(z.string().min(1)).min(1).max(1024),
  /** Embedding model for labels and chunks (default: the encode stage's model and vectors). */
  model: z.string().min(1).optional(),
  /** Minimum cosine similarity of a kept label. */
  threshold: z.number().min(-1).max(1).default(0.3),
  /** Keep at most this many labels per chunk, best first. */
  topK: z.number().int().min(1).max(1024).default(3),
});

export const WriteStage = z.strictObject({
  /** LanceDB folder. */
  index: z.string().min(1).default('./shoal-index'),
  table: TableName.default('chunks'),
  /** Documents are committed once this many rows are ready (and at the end). */
  batchRows: z.number().int().min(1).max(100_000).default(2_000),
});

export const PipelineDefinition = z.strictObject({
  name: z.string().min(1).max(128),
  description: z.string().optional(),
  stages: z.strictObject({
    parse: ParseStage.default(ParseStage.parse({})),
    chunk: ChunkStage.default(ChunkStage.parse({})),
    encode: EncodeStage.default(EncodeStage.parse({})),
    extract: ExtractStage.optional(),
    classify: ClassifyStage.optional(),
    write: WriteStage.default(WriteStage.parse({})),
  }),
});
export type PipelineDefinition = z.output<typeof PipelineDefinition>;
export type PipelineDefinitionInput = z.input<typeof PipelineDefinition>;

/** Validates a definition (already parsed from YAML/JSON); `where` names it in messages. */
export function parseDefinition(value: unknown, where: string): PipelineDefinition {
  const result = PipelineDefinition.safeParse(value);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`).join('; ');
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `pipeline ${where}: ${problems}`);
  }
  return result.data;
}

/**
 * A pipeline file is a few hundred bytes (1,024 classify labels fit in a few KiB): a larger one is
 * a mistake, such as a corpus given as `--pipeline`, and is refused before it is read (a 300 MB
 * file was read whole and crashed the process out of memory).
 */
const MAX_PIPELINE_FILE_BYTES = 1024 * 1024;

/** The file's text: a regular file of at most MAX_PIPELINE_FILE_BYTES (never a device or a pipe, which could be endless), without a byte order mark. */
async function readDefinitionText(path: string): Promise<string> {
  const tooLarge = (size: string): ShoalError =>
    new ShoalError(ErrorCode.CONFIG_INVALID, `pipeline file ${path}: ${size}, larger than a pipeline file may be (${MAX_PIPELINE_FILE_BYTES} bytes): is it the right file?`);
  let bytes: Buffer;
  try {
    const info = await stat(path);
    if (!info.isFile()) throw new ShoalError(ErrorCode.CONFIG_INVALID, `pipeline file ${path}: not a regular file`);
    if (info.size > MAX_PIPELINE_FILE_BYTES) throw tooLarge(`${info.size} bytes`);
    const handle = await open(path, 'r');
    try {
      // One byte more than the limit, so a file that grew since stat is still caught.
      const buffer = Buffer.alloc(MAX_PIPELINE_FILE_BYTES + 1);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
      if (bytesRead > MAX_PIPELINE_FILE_BYTES) throw tooLarge(`over ${MAX_PIPELINE_FILE_BYTES} bytes`);
      bytes = buffer.subarray(0, bytesRead);
    } finally {
      await handle.close();
    }
  } catch (error) {
    if (isShoalError(error)) throw error;
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `pipeline file ${path}: cannot read it`, { cause: error });
  }
  return bytes.toString('utf8').replace(/^\uFEFF/, '');
}

/** YAML, or JSON for `.json`; duplicate keys are refused in both (JSON.parse kept the last one silently). */
function parseDefinitionText(text: string, path: string): unknown {
  const json = extname(path).toLowerCase() === '.json';
  try {
    if (!json) return parseYaml(text); // refuses duplicate keys and alias bombs itself
    const value: unknown = JSON.parse(text);
    parseYaml(text, { schema: 'json' }); // JSON is YAML: this pass only looks for duplicate keys
    return value;
  } catch (error) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `pipeline file ${path}: not valid ${json ? 'JSON' : 'YAML'}`, { cause: error });
  }
}

/** Reads a `.yaml`/`.yml`/`.json` pipeline file. */
export async function loadDefinitionFile(path: string): Promise<PipelineDefinition> {
  const text = await readDefinitionText(path);
  const value = text.trim() === '' ? null : parseDefinitionText(text, path);
  if (value === null || value === undefined) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `pipeline file ${path}: empty (or only comments): write a definition, e.g. {name: my-pipeline, stages: {encode: {model: M}}}; shoal pipelines show prints the built-in one in full`);
  }
  const definition = parseDefinition(withDefaultName(value, path), path);
  return { ...definition, stages: { ...definition.stages, write: { ...definition.stages.write, index: indexBesideFile(value, definition.stages.write.index, path) } } };
}

/**
 * A relative local index written in a pipeline file is relative to the file, as paths in config
 * files are, not to wherever the command runs; URIs, absolute paths and the default are kept.
 */
function indexBesideFile(raw: unknown, index: string, file: string): string {
  const written = z.looseObject({ stages: z.looseObject({ write: z.looseObject({ index: z.string() }) }) }).safeParse(raw);
  if (!written.success || uriScheme(index) !== undefined || isAbsolute(index)) return index;
  return resolve(dirname(resolve(file)), index);
}

/**
 * A file without `name` is named after itself (`my-pipeline.yaml` → `my-pipeline`): a missing
 * name is not worth a failure, and reporting it first would hide the file's real mistakes.
 */
function withDefaultName(value: unknown, path: string): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || 'name' in value) return value;
  const name = basename(path, extname(path)).slice(0, 128);
  return name === '' ? value : { name, ...value };
}

/**
 * A model folder given relative to the working folder (`../models/bge`) is recorded in the index
 * as an absolute path: `shoal search`, which reads the model from the index, runs from anywhere.
 */
export function modelPathFromCwd(model: string): string {
  return /^\.{1,2}([/\\]|$)/.test(model) ? resolve(model) : model;
}

/** What a command line may change in a definition (flags win over the file). */
export interface DefinitionOverrides {
  model?: string | undefined;
  ocr?: 'auto' | 'always' | 'never' | undefined;
  index?: string | undefined;
  table?: string | undefined;
  /**
   * Chunk size in the encoder's tokens (8 to 8192). Without `chunkOverlap` the overlap is the
   * default for that size, min(32, size / 4): the pipeline's own overlap may not fit a smaller size.
   */
  chunkSize?: number | undefined;
  /** Tokens repeated between chunks (0 to 4096, smaller than the size). */
  chunkOverlap?: number | undefined;
}

function chunkOverride(chunk: PipelineDefinition['stages']['chunk'], overrides: DefinitionOverrides): z.input<typeof ChunkStage> {
  if (overrides.chunkSize === undefined) return overrides.chunkOverlap === undefined ? chunk : { ...chunk, overlap: overrides.chunkOverlap };
  return { size: overrides.chunkSize, ...(overrides.chunkOverlap === undefined ? {} : { overlap: overrides.chunkOverlap }) };
}

/** One stage of a parsed definition checked again after a flag changed it, with parseDefinition's wording. */
function overriddenStage<S extends z.ZodType>(schema: S, stage: string, value: unknown): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => `stages.${stage}${issue.path.length === 0 ? '' : `.${issue.path.join('.')}`}: ${issue.message}`).join('; ');
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `pipeline after command-line overrides: ${problems}`);
  }
  return result.data;
}

/**
 * The definition with the command line's flags applied. It was parsed once, when it was read; only
 * the stages a flag changes are checked again, against their own schemas (the stages have no rule
 * across each other), and the untouched ones are kept as they are.
 */
export function applyOverrides(definition: PipelineDefinition, overrides: DefinitionOverrides): PipelineDefinition {
  const { stages } = definition;
  const write = overrides.index === undefined && overrides.table === undefined
    ? stages.write
    : overriddenStage(WriteStage, 'write', { ...stages.write, ...(overrides.index === undefined ? {} : { index: overrides.index }), ...(overrides.table === undefined ? {} : { table: overrides.table }) });
  return {
    ...definition,
    stages: {
      ...stages,
      parse: overrides.ocr === undefined ? stages.parse : overriddenStage(ParseStage, 'parse', { ...stages.parse, ocr: overrides.ocr }),
      chunk: overrides.chunkSize === undefined && overrides.chunkOverlap === undefined ? stages.chunk : overriddenStage(ChunkStage, 'chunk', chunkOverride(stages.chunk, overrides)),
      encode: overrides.model === undefined ? stages.encode : overriddenStage(EncodeStage, 'encode', { ...stages.encode, model: overrides.model }),
      write,
    },
  };
}
