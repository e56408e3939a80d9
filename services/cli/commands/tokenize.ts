import type { Command } from 'commander';
import { z } from 'zod';
import { ItemId, ModelRef, Role, TextItem, type TokenizeRequest } from '../../../adapters/protocol/requests.js';
import type { TokenizedItem } from '../../../adapters/protocol/results.js';
import type { CliApp } from '../app.js';
import { addLineFieldOptions, LineFieldFlags } from '../line-fields.js';
import { addLineIoOptions, LineIoFlags, lineIo, parseFlags } from '../line-options.js';

/**
 * `shoal tokenize`: what the model would see, without running it (no ONNX session is loaded):
 * ids, token strings, whether the text was truncated and its untruncated length.
 */

const TokenizeLine = z.object({
  id: ItemId.optional(),
  text: TextItem.shape.text,
  /** Second segment: the model's pair template and longest-first truncation apply. */
  pair: TextItem.shape.text.optional(),
  role: Role.optional(),
});
type TokenizeLine = z.infer<typeof TokenizeLine>;

const TokenizeFlags = z.strictObject({
  ...LineIoFlags,
  ...LineFieldFlags,
  output: z.string().min(1).optional(),
  model: ModelRef,
  role: Role.optional(),
  prompt: z.string().min(1).optional(),
  promptText: z.string().optional(),
  instruction: z.string().min(1).optional(),
});

const EXAMPLE = `
Input lines:  {"id": "a", "text": "Hello world"}        (optional: "pair": "second segment")
Output lines: {"id": "a", "ids": [101, 7592, 2088, 102], "tokens": ["[CLS]", "hello", "world", "[SEP]"],
               "truncated": false, "length": 4}
              length is the token count before truncation, special tokens included.

Examples:
  $ echo '{"text":"Hello world"}' | shoal tokenize --model sentence-transformers/all-MiniLM-L6-v2
  $ shoal tokenize --model intfloat/multilingual-e5-small --role query --max-length 32 -i texts.jsonl`;

function resultLine(id: ItemId, item: TokenizedItem | undefined): object {
  return { id, ids: item?.ids ?? [], tokens: item?.tokens ?? [], truncated: item?.truncated ?? false, length: item?.length ?? 0 };
}

export function registerTokenize(program: Command, app: CliApp): void {
  const command = program
    .command('tokenize')
    .summary("show the model's token ids and tokens (no inference)")
    .description('Tokenize each {"id","text"} line the way the model would, prompts, special tokens and truncation included.')
    .requiredOption('-m, --model <model>', 'model: catalog name, hub id (org/name[@revision]) or local folder')
    .option('--role <role>', "query or document: picks the model's query/document prompt")
    .option('--prompt <name>', 'named prompt from the model')
    .option('--prompt-text <text>', 'literal text prepended to every input')
    .option('--instruction <text>', "task description filled into the model's instruction template");
  addLineIoOptions(command, { outputFlagIsFile: true });
  addLineFieldOptions(command, { text: true });
  command.addHelpText('after', EXAMPLE);
  command.action(async (_options: unknown, self: Command) => {
    const flags = parseFlags(TokenizeFlags, self);
    const prepare = app.lineFields(self, flags);
    await app.runLines<TokenizeLine>(self, lineIo(flags), (engine) => ({
      schema: TokenizeLine,
      prepare,
      run: async (lines, signal) => {
        const request: TokenizeRequest = {
          model: flags.model,
          items: lines.map(({ value }) => {
            const item: { text: string; pair?: string; role?: Role } = { text: value.text };
            if (value.pair !== undefined) item.pair = value.pair;
            if (value.role !== undefined) item.role = value.role;
            return item;
          }),
          role: flags.role,
          prompt: flags.prompt,
          prompt_text: flags.promptText,
          instruction: flags.instruction,
          max_length: flags.maxLength,
        };
        const result = await engine.tokenize(request, { signal });
        const byIndex = new Map(result.items.map((item) => [item.index, item]));
        return lines.map((line, index) => resultLine(line.id, byIndex.get(index)));
      },
    }));
  });
}
