import type { Command } from 'commander';
import { z } from 'zod';
import { DEFAULT_LIMITS } from '../../../adapters/protocol/limits.js';
import { ItemId, ModelRef, ScoreRequest } from '../../../adapters/protocol/requests.js';
import type { CliApp } from '../app.js';
import { addLineFieldOptions, LineFieldFlags } from '../line-fields.js';
import { addLineIoOptions, LineIoFlags, lineIo, parseFlags, PositiveIntFlag } from '../line-options.js';

/**
 * `shoal score`: one query and its items per line → the items' scores, best first. Cross-encoders
 * score each (query, item) pair; embedding models (dense, SPLADE, ColBERT) score by similarity.
 * Lines of a chunk are sent to the engine together, so the model thread always has work queued.
 */

const ScoreLine = z.object({
  id: ItemId.optional(),
  query: ScoreRequest.shape.query,
  items: ScoreRequest.shape.items,
});
type ScoreLine = z.infer<typeof ScoreLine>;

const ScoreFlags = z.strictObject({
  ...LineIoFlags,
  idField: LineFieldFlags.idField,
  output: z.string().min(1).optional(),
  model: ModelRef,
  topK: PositiveIntFlag(DEFAULT_LIMITS.maxItemsPerRequest).optional(),
  prompt: z.string().min(1).optional(),
  instruction: z.string().min(1).optional(),
});

const EXAMPLE = `
Input lines:  {"id": "q1", "query": "How many people live in Berlin?",
               "items": ["Berlin has 3.5 million inhabitants.", {"id": "d7", "text": "Paris is in France."}]}
Output lines: {"id": "q1", "scores": [{"index": 0, "score": 0.97}, {"index": 1, "id": "d7", "score": 0.02}]}
              scores are sorted best first; "index" is the item's position in "items".

Examples:
  $ shoal score --model cross-encoder/ms-marco-MiniLM-L6-v2 -i queries.jsonl -o scores.jsonl
  $ shoal score --model cross-encoder/ms-marco-MiniLM-L6-v2 --max-length 256 --top-k 10 < queries.jsonl`;

export function registerScore(program: Command, app: CliApp): void {
  const command = program
    .command('score')
    .summary('rerank: score the items of each line against its query')
    .description('Score each {"id","query","items"} line with a cross-encoder, or by embedding similarity.')
    .requiredOption('-m, --model <model>', 'model: catalog name, hub id (org/name[@revision]) or local folder')
    .option('--top-k <k>', 'keep only the best k scores of each line (default: all)')
    .option('--prompt <name>', 'named prompt for the query (embedding models)')
    .option('--instruction <text>', "task description: filled into an embedding model's instruction template, or into a causal-LM reranker's prompt (Qwen3-Reranker)");
  addLineIoOptions(command, { outputFlagIsFile: true });
  addLineFieldOptions(command, { text: false });
  command.addHelpText('after', EXAMPLE);
  command.action(async (_options: unknown, self: Command) => {
    const flags = parseFlags(ScoreFlags, self);
    const prepare = app.lineFields(self, { idField: flags.idField });
    await app.runLines<ScoreLine>(self, lineIo(flags), (engine) => ({
      schema: ScoreLine,
      prepare,
      run: async (lines, signal) =>
        Promise.all(
          lines.map(async ({ id, value }) => {
            const result = await engine.score(
              {
                model: flags.model,
                query: value.query,
                items: value.items,
                top_k: flags.topK,
                prompt: flags.prompt,
                instruction: flags.instruction,
                max_length: flags.maxLength,
                priority: 'bulk',
              },
              { signal },
            );
            return { id, scores: result.scores };
          }),
        ),
    }));
  });
}
