import type { Command } from 'commander';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { ImageItem, ItemId, ModelRef, Role, TextItem, type EncodeRequest, type Item, type OutputType } from '../../../adapters/protocol/requests.js';
import { Dimensions, EmbeddingDtype } from '../../../adapters/protocol/output-types.js';
import type { EncodedItem } from '../../../adapters/protocol/results.js';
import type { CliApp } from '../app.js';
import { addLineFieldOptions, LineFieldFlags } from '../line-fields.js';
import { summaryLine } from '../progress.js';
import { addImageOptions, addLineIoOptions, ImageFlags, imagePolicyFromFlags, LineIoFlags, lineIo, parseFlags, parseOutputTypes } from '../line-options.js';

/**
 * `shoal encode`: `{"id","text"}` lines → `{"id","dense"|"sparse"|"multivector"}` lines.
 * The representations are chosen with `--output LIST` (the product spec's spelling) or its
 * unambiguous synonym `--output-types LIST`; results go to stdout or `--out FILE`. A `--output`
 * value that is not a representation list (say `results.jsonl`) is refused with a pointer to
 * `--out`, so the two meanings can never be confused silently.
 */

const EncodeLine = z
  .object({
    id: ItemId.optional(),
    text: TextItem.shape.text.optional(),
    /** An image path (inside the image roots), http(s) URL (allowed hosts) or data: URL, for image models (CLIP...). */
    image: ImageItem.shape.image.optional(),
    /** Overrides --role for this line. */
    role: Role.optional(),
  })
  .refine((line) => (line.text === undefined) !== (line.image === undefined), { message: 'a line needs "text" or "image" (exactly one)', path: ['text'] });
type EncodeLine = z.infer<typeof EncodeLine>;

const EncodeFlags = z.strictObject({
  ...LineIoFlags,
  ...LineFieldFlags,
  ...ImageFlags,
  model: ModelRef,
  output: z.string().optional(),
  outputTypes: z.string().optional(),
  role: Role.optional(),
  prompt: z.string().min(1).optional(),
  promptText: z.string().optional(),
  instruction: z.string().min(1).optional(),
  normalize: z.boolean().optional(),
  dtype: EmbeddingDtype.optional(),
  dimensions: z.coerce.number().pipe(Dimensions).optional(),
});

const EXAMPLE = `
Input lines:  {"id": "a", "text": "How many people live in Berlin?", "role": "query"}
Output lines: {"id": "a", "dense": [0.0123, ...]}          (one per input line, in input order)
              sparse: {"indices": [...], "values": [...]}   multivector: [[...], ...]
              "truncated": true is added when a text was cut to --max-length.

Examples:
  $ echo '{"id":1,"text":"hello world"}' | shoal encode --model sentence-transformers/all-MiniLM-L6-v2
  $ shoal encode --model naver/splade-v3 --output sparse -i docs.jsonl -o vectors.jsonl
  $ shoal encode --model colbert-ir/colbertv2.0 --output multivector --role query < queries.jsonl
  $ echo '{"id":"cat","image":"photos/cat.jpg"}' | shoal encode --model Xenova/clip-vit-base-patch32
  $ shoal encode --model BAAI/bge-small-en-v1.5 --id-field _id --template '{title}. {text}' corpus.jsonl -o vectors.jsonl
  $ shoal encode --model BAAI/bge-small-en-v1.5 corpus.jsonl -o vectors.jsonl --resume   # after Ctrl-C: continue vectors.jsonl.partial

--output LIST names the representations (as in the spec); write results to a file with --out FILE.`;

function outputTypes(flags: { output?: string | undefined; outputTypes?: string | undefined }): OutputType[] | undefined {
  const fromOutput =
    flags.output === undefined
      ? undefined
      : parseOutputTypes(flags.output, '--output', '; in `shoal encode`, --output names representations: write results to a file with --out FILE (or -o FILE)');
  const fromTypes = flags.outputTypes === undefined ? undefined : parseOutputTypes(flags.outputTypes, '--output-types');
  if (fromOutput !== undefined && fromTypes !== undefined && fromOutput.join(',') !== fromTypes.join(',')) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `--output ${flags.output} and --output-types ${flags.outputTypes} disagree; give one`);
  }
  return fromOutput ?? fromTypes;
}

function lineItem(line: EncodeLine): Item {
  const role = line.role === undefined ? {} : { role: line.role };
  return line.image === undefined ? { text: line.text ?? '', ...role } : { image: line.image, ...role };
}

function resultLine(id: ItemId, item: EncodedItem | undefined): object {
  const line: Record<string, unknown> = { id };
  if (item?.dense !== undefined) line.dense = item.dense;
  if (item?.sparse !== undefined) line.sparse = item.sparse;
  if (item?.multivector !== undefined) line.multivector = item.multivector;
  if (item?.truncated === true) line.truncated = true;
  return line;
}

export function registerEncode(program: Command, app: CliApp): void {
  const command = program
    .command('encode')
    .summary('text → dense / sparse / multi-vector embeddings')
    .description('Encode each {"id","text"} line with an embedding model (dense, SPLADE, ColBERT...).')
    .requiredOption('-m, --model <model>', 'model: catalog name, hub id (org/name[@revision]) or local folder')
    .option('--output <list>', "representations, comma-separated: dense,sparse,multivector (default: the model's own)")
    .option('--output-types <list>', 'same as --output <list>')
    .option('--role <role>', 'query or document: picks the model\'s query/document prompt and encoding (default: document)')
    .option('--prompt <name>', 'named prompt from the model (config_sentence_transformers.json or catalog)')
    .option('--prompt-text <text>', 'literal text prepended to every input instead of a named prompt')
    .option('--instruction <text>', "task description filled into the model's instruction template")
    .option('--normalize', 'L2-normalize dense vectors')
    .option('--no-normalize', "return dense vectors as pooled (default: the model's own configuration)")
    .option('--dtype <type>', 'dense output type: float32 (default), float16, int8, uint8 (fixed range [-1, 1]), binary, ubinary (sign bits, 8 dimensions per value)')
    .option('--dimensions <n>', 'keep the first N dense dimensions (Matryoshka), normalized again when the vectors are unit length');
  addLineIoOptions(command, { outputFlagIsFile: false });
  addLineFieldOptions(command, { text: true });
  addImageOptions(command);
  command.addHelpText('after', EXAMPLE);
  command.action(async (_options: unknown, self: Command) => {
    const flags = parseFlags(EncodeFlags, self);
    const types = outputTypes(flags);
    const io = lineIo({ input: flags.input, out: flags.out, resume: flags.resume });
    const prepare = app.lineFields(self, flags);
    const totals = { tokens: 0, truncated: 0 };
    const run = await app.runLines<EncodeLine>(self, io, (engine) => ({
      schema: EncodeLine,
      prepare,
      itemPerLine: true,
      run: async (lines, signal) => {
        const request: EncodeRequest = {
          model: flags.model,
          items: lines.map(({ value }) => lineItem(value)),
          output_types: types,
          role: flags.role,
          prompt: flags.prompt,
          prompt_text: flags.promptText,
          instruction: flags.instruction,
          normalize: flags.normalize,
          dtype: flags.dtype,
          dimensions: flags.dimensions,
          max_length: flags.maxLength,
          priority: 'bulk',
        };
        const result = await engine.encode(request, { signal });
        totals.tokens += result.usage.tokens;
        totals.truncated += result.items.filter((item) => item.truncated === true).length;
        const byIndex = new Map(result.items.map((item) => [item.index, item]));
        return lines.map((line, index) => resultLine(line.id, byIndex.get(index)));
      },
    }), { images: imagePolicyFromFlags(flags) });
    run.progress.note(summaryLine('encode', { ...totals, lines: run.lines, resumed: run.resumed, seconds: run.seconds }));
  });
}
