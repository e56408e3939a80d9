import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { TextTokenizer } from '../../tokenizers/text-tokenizer.js';
import type { PreparedText } from '../family.js';

/**
 * The prompt of a causal-LM reranker, as configuration (Qwen3-Reranker's by default):
 * tokens(prefix) + tokens(template filled with instruction, query, document) + tokens(suffix),
 * each part tokenized without special tokens. The template ends with `{document}`, so a pair over
 * the token budget loses the end of its document only: the prefix, the instruction, the query and
 * the suffix (whose last tokens are where the answer is read) are always whole.
 */

export const QWEN3_RERANKER_PROMPT = {
  prefix:
    '<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n',
  suffix: '<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n',
  template: '<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}',
  defaultInstruction: 'Given a web search query, retrieve relevant passages that answer the query',
  yesToken: 'yes',
  noToken: 'no',
} as const;

const DOCUMENT = '{document}';

export const RerankerPrompt = z.strictObject({
  prefix: z.string().default(QWEN3_RERANKER_PROMPT.prefix),
  suffix: z.string().default(QWEN3_RERANKER_PROMPT.suffix),
  template: z
    .string()
    .default(QWEN3_RERANKER_PROMPT.template)
    .refine((t) => t.endsWith(DOCUMENT) && t.indexOf(DOCUMENT) === t.length - DOCUMENT.length, {
      message: `the template must end with ${DOCUMENT} and name it once (text after the document belongs in suffix)`,
    }),
  defaultInstruction: z.string().default(QWEN3_RERANKER_PROMPT.defaultInstruction),
});
export type RerankerPrompt = z.output<typeof RerankerPrompt>;

export interface PromptPair {
  query: string;
  document: string;
  instruction?: string | undefined;
}

/** Token ids of the fixed parts, per tokenizer and prompt (a request's pairs all share them). */
const fixedParts = new WeakMap<TextTokenizer, Map<string, number[]>>();

function fixedIds(tokenizer: TextTokenizer, text: string): number[] {
  let known = fixedParts.get(tokenizer);
  if (known === undefined) {
    known = new Map();
    fixedParts.set(tokenizer, known);
  }
  let ids = known.get(text);
  if (ids === undefined) {
    ids = tokenizer.segmentIds(text);
    if (known.size > 64) known.clear();
    known.set(text, ids);
  }
  return ids;
}

/** The template before `{document}`, filled in one pass (a query containing "{instruction}" stays literal). */
function head(prompt: RerankerPrompt, pair: PromptPair): string {
  const before = prompt.template.slice(0, prompt.template.length - DOCUMENT.length);
  const values: Record<string, string> = { instruction: pair.instruction ?? prompt.defaultInstruction, query: pair.query };
  return before.replace(/\{(instruction|query)\}/g, (_, key: string) => values[key] ?? '');
}

export interface PromptOptions {
  maxLength: number;
  /** Count the whole untruncated length (tokenize command). */
  exactLength?: boolean;
}

/** One pair's model input: prefix, filled template (document cut to the budget), suffix. */
export function promptIds(tokenizer: TextTokenizer, prompt: RerankerPrompt, pair: PromptPair, options: PromptOptions): PreparedText {
  const prefix = fixedIds(tokenizer, prompt.prefix);
  const suffix = fixedIds(tokenizer, prompt.suffix);
  const filledHead = head(prompt, pair);
  const budget = options.maxLength - prefix.length - suffix.length;
  // The head's own tokens are an upper bound on what it takes inside the whole (its trailing
  // space joins the document's first word), so a cut at `budget` lands inside the document.
  const headTokens = fixedIds(tokenizer, filledHead).length;
  if (budget < headTokens) {
    throw new ShoalError(
      ErrorCode.INPUT_TOO_LARGE,
      `the reranker prompt without its document takes ${prefix.length + headTokens + suffix.length} tokens (instruction and query included), over max_length ${options.maxLength}; shorten the query or instruction, or raise max_length`,
    );
  }
  const text = filledHead + pair.document;
  let middle: number[];
  let length: number;
  let truncated = false;
  if (options.exactLength === true || tokenizer.info.truncationSide === 'left') {
    const all = tokenizer.segmentIds(text);
    length = all.length;
    middle = all.length > budget ? all.slice(0, budget) : all;
    truncated = all.length > budget;
  } else {
    // Right truncation without special tokens: a long document is tokenized only as far as the budget needs.
    const encoded = tokenizer.encode(text, { maxLength: budget, addSpecialTokens: false });
    middle = encoded.ids;
    length = encoded.length;
    truncated = encoded.truncated;
  }
  const ids = [...prefix, ...middle, ...suffix];
  return {
    kind: 'text',
    ids,
    typeIds: null,
    attention: null,
    truncated,
    length: prefix.length + length + suffix.length,
    promptTokens: 0,
    role: 'document',
  };
}
