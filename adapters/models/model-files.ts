import { readdir, readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { parseWith } from '../protocol/validate.js';

/**
 * Reads the configuration files of a Hugging Face model folder, each through a zod schema
 * (they are untrusted input like any other). Only the keys Shoal uses are declared.
 */

export const HfConfig = z.looseObject({
  architectures: z.array(z.string()).nullable().optional(),
  model_type: z.string().optional(),
  max_position_embeddings: z.number().int().optional(),
  pad_token_id: z.number().int().nullable().optional(),
  type_vocab_size: z.number().int().optional(),
  hidden_size: z.number().int().optional(),
  num_attention_heads: z.number().int().optional(),
  num_hidden_layers: z.number().int().optional(),
  /** Grouped-query attention: heads of the KV cache (default num_attention_heads). */
  num_key_value_heads: z.number().int().positive().optional(),
  /** Explicit per-head size (Qwen3, Gemma); default hidden_size / num_attention_heads. */
  head_dim: z.number().int().positive().nullable().optional(),
  vocab_size: z.number().int().optional(),
  id2label: z.record(z.string(), z.string()).optional(),
  num_labels: z.number().int().optional(),
  problem_type: z.string().nullable().optional(),
  sentence_transformers: z.looseObject({ activation_fn: z.string().optional() }).optional(),
  text_config: z.looseObject({ max_position_embeddings: z.number().int().optional() }).optional(),
});
export type HfConfig = z.infer<typeof HfConfig>;

export const StModule = z.looseObject({
  idx: z.number().int().optional(),
  name: z.string().optional(),
  path: z.string(),
  type: z.string(),
});
export const StModules = z.array(StModule);
export type StModule = z.infer<typeof StModule>;

export const StPoolingConfig = z.looseObject({
  word_embedding_dimension: z.number().int().optional(),
  pooling_mode_cls_token: z.boolean().default(false),
  pooling_mode_mean_tokens: z.boolean().default(false),
  pooling_mode_max_tokens: z.boolean().default(false),
  pooling_mode_mean_sqrt_len_tokens: z.boolean().default(false),
  pooling_mode_weightedmean_tokens: z.boolean().default(false),
  pooling_mode_lasttoken: z.boolean().default(false),
  include_prompt: z.boolean().default(true),
});
export type StPoolingConfig = z.infer<typeof StPoolingConfig>;

export const StSpladePoolingConfig = z.looseObject({
  pooling_strategy: z.enum(['max', 'sum']).default('max'),
  activation_function: z.enum(['relu', 'log1p_relu']).default('relu'),
});

export const SentenceBertConfig = z.looseObject({
  max_seq_length: z.number().int().positive().optional(),
  do_lower_case: z.boolean().optional(),
});

export const StConfig = z.looseObject({
  prompts: z.record(z.string(), z.string()).default({}),
  default_prompt_name: z.string().nullable().optional(),
  similarity_fn_name: z.string().nullable().optional(),
});

export const ColbertMetadata = z.looseObject({
  dim: z.number().int().positive().optional(),
  query_maxlen: z.number().int().positive().default(32),
  doc_maxlen: z.number().int().positive().default(180),
  query_token_id: z.string().default('[unused0]'),
  doc_token_id: z.string().default('[unused1]'),
  mask_punctuation: z.boolean().default(true),
  attend_to_mask_tokens: z.boolean().default(false),
  similarity: z.enum(['cosine', 'l2']).default('cosine'),
});

export const GlinerConfig = z.looseObject({
  span_mode: z.string().default('markerV0'),
  max_width: z.number().int().positive().default(12),
  max_len: z.number().int().positive().default(384),
  ent_token: z.string().default('<<ENT>>'),
  sep_token: z.string().default('<<SEP>>'),
  words_splitter_type: z.string().default('whitespace'),
  subtoken_pooling: z.string().default('first'),
});

const MAX_DEPTH = 3;
const MAX_FILES = 5000;

/** A model folder: its file list and cached, schema-checked JSON files. */
export class ModelFolder {
  readonly dir: string;
  readonly files: readonly string[];
  readonly #json = new Map<string, unknown>();

  private constructor(dir: string, files: string[]) {
    this.dir = dir;
    this.files = files;
  }

  static async open(dir: string): Promise<ModelFolder> {
    const files: string[] = [];
    const walk = async (current: string, depth: number): Promise<void> => {
      let entries;
      try {
        entries = await readdir(current, { withFileTypes: true });
      } catch (error) {
        throw new ShoalError(ErrorCode.MODEL_NOT_FOUND, `cannot read model folder ${current}`, { cause: error });
      }
      for (const entry of entries) {
        if (files.length >= MAX_FILES) return;
        const path = join(current, entry.name);
        if (entry.isDirectory() && depth < MAX_DEPTH && !entry.name.startsWith('.')) await walk(path, depth + 1);
        // Hub cache snapshots hold symbolic links to blobs: count them as files.
        else if (entry.isFile() || entry.isSymbolicLink()) files.push(relative(dir, path).split('\\').join('/'));
      }
    };
    await walk(dir, 0);
    files.sort();
    return new ModelFolder(dir, files);
  }

  has(path: string): boolean {
    return this.files.includes(path);
  }

  path(file: string): string {
    return join(this.dir, file);
  }

  /** Parses `file` with `schema`; returns undefined when the file is absent. */
  async json<S extends z.ZodType>(file: string, schema: S): Promise<z.output<S> | undefined> {
    if (!this.has(file)) return undefined;
    let raw = this.#json.get(file);
    if (raw === undefined) {
      let text: string;
      try {
        text = await readFile(this.path(file), 'utf8');
      } catch (error) {
        throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `cannot read ${file} in ${this.dir}`, { cause: error });
      }
      try {
        raw = JSON.parse(text);
      } catch (error) {
        throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${file} in ${this.dir} is not valid JSON`, { cause: error });
      }
      this.#json.set(file, raw);
    }
    return parseWith(schema, raw, `${file} in ${this.dir}`, ErrorCode.MODEL_LOAD_FAILED);
  }

  async text(file: string): Promise<string | undefined> {
    if (!this.has(file)) return undefined;
    return readFile(this.path(file), 'utf8');
  }
}
