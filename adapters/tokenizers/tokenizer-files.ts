import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { parseWith } from '../protocol/validate.js';

/**
 * The parts of a Hugging Face tokenizer folder Shoal reads itself (the rest is handed to
 * @huggingface/tokenizers untouched). Loose objects: these files carry many keys we ignore.
 */

const SpecialTokenRef = z.tuple([z.string(), z.number().int()]);

const TemplatePiece = z
  .object({
    SpecialToken: z.object({ id: z.string(), type_id: z.number().int().default(0) }).optional(),
    Sequence: z.object({ id: z.enum(['A', 'B']), type_id: z.number().int().default(0) }).optional(),
  })
  .refine((piece) => (piece.SpecialToken === undefined) !== (piece.Sequence === undefined), 'a template piece is either SpecialToken or Sequence');
export type TemplatePieceJson = z.infer<typeof TemplatePiece>;

export interface PostProcessorJson {
  type: string;
  single?: TemplatePieceJson[] | undefined;
  pair?: TemplatePieceJson[] | undefined;
  special_tokens?: Record<string, { id: string; ids: number[]; tokens: string[] }> | undefined;
  sep?: [string, number] | undefined;
  cls?: [string, number] | undefined;
  processors?: PostProcessorJson[] | undefined;
}

export const PostProcessor: z.ZodType<PostProcessorJson> = z.lazy(() =>
  z.looseObject({
    type: z.string(),
    single: z.array(TemplatePiece).optional(),
    pair: z.array(TemplatePiece).optional(),
    special_tokens: z
      .record(z.string(), z.looseObject({ id: z.string(), ids: z.array(z.number().int()), tokens: z.array(z.string()) }))
      .optional(),
    sep: SpecialTokenRef.optional(),
    cls: SpecialTokenRef.optional(),
    processors: z.array(PostProcessor).optional(),
  }),
);

const AddedTokenJson = z.looseObject({
  id: z.number().int(),
  content: z.string(),
  special: z.boolean().default(false),
});

export const TokenizerJson = z.looseObject({
  added_tokens: z.array(AddedTokenJson).default([]),
  normalizer: z.unknown().optional(),
  pre_tokenizer: z.unknown().optional(),
  post_processor: PostProcessor.nullable().optional(),
  padding: z
    .looseObject({
      direction: z.enum(['Left', 'Right']).optional(),
      pad_id: z.number().int().optional(),
      pad_token: z.string().optional(),
    })
    .nullable()
    .optional(),
  truncation: z.looseObject({ max_length: z.number().int().optional() }).nullable().optional(),
  model: z.looseObject({
    type: z.string(),
    unk_token: z.string().nullable().optional(),
    continuing_subword_prefix: z.string().nullable().optional(),
    end_of_word_suffix: z.string().nullable().optional(),
  }),
});
export type TokenizerJson = z.infer<typeof TokenizerJson>;

/** A token in tokenizer_config.json is either a plain string or an AddedToken object. */
const TokenString = z
  .union([z.string(), z.looseObject({ content: z.string() })])
  .nullable()
  .optional()
  .transform((value) => (value === null || value === undefined ? undefined : typeof value === 'string' ? value : value.content));

export const TokenizerConfigJson = z.looseObject({
  model_max_length: z.number().optional(),
  padding_side: z.enum(['left', 'right']).optional(),
  truncation_side: z.enum(['left', 'right']).optional(),
  pad_token: TokenString,
  unk_token: TokenString,
  cls_token: TokenString,
  sep_token: TokenString,
  mask_token: TokenString,
  bos_token: TokenString,
  eos_token: TokenString,
  do_lower_case: z.boolean().optional(),
  tokenizer_class: z.string().optional(),
});
export type TokenizerConfigJson = z.infer<typeof TokenizerConfigJson>;

export interface TokenizerFiles {
  /** The raw tokenizer.json object, handed to @huggingface/tokenizers. */
  raw: Record<string, unknown>;
  json: TokenizerJson;
  /** Raw tokenizer_config.json (the library reads a few keys from it). */
  rawConfig: Record<string, unknown>;
  config: TokenizerConfigJson;
}

async function readJsonFile(path: string, what: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `cannot read ${what} at ${path}`, { cause: error });
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${what} at ${path} is not valid JSON`, { cause: error });
  }
}

function asRecord(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

/** Reads `tokenizer.json` (required) and `tokenizer_config.json` (optional) from a model folder. */
export async function readTokenizerFiles(dir: string, configOverrides: Record<string, unknown> = {}): Promise<TokenizerFiles> {
  const tokenizerPath = join(dir, 'tokenizer.json');
  const raw = asRecord(await readJsonFile(tokenizerPath, 'tokenizer.json'));
  const json = parseWith(TokenizerJson, raw, `tokenizer.json in ${dir}`, ErrorCode.MODEL_LOAD_FAILED);
  let rawConfig: Record<string, unknown> = {};
  try {
    rawConfig = asRecord(JSON.parse(await readFile(join(dir, 'tokenizer_config.json'), 'utf8')));
  } catch (error) {
    // tokenizer_config.json is optional; a missing file is normal, a broken one is reported.
    if (!(error instanceof Error && 'code' in error && error.code === 'ENOENT')) {
      throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `tokenizer_config.json in ${dir} is not valid JSON`, { cause: error });
    }
  }
  rawConfig = { ...rawConfig, ...configOverrides };
  const config = parseWith(TokenizerConfigJson, rawConfig, `tokenizer_config.json in ${dir}`, ErrorCode.MODEL_LOAD_FAILED);
  return { raw, json, rawConfig, config };
}
