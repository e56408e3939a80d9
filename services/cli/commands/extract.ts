import type { Command } from 'commander';
import { z } from 'zod';
import { Aggregation, ImageItem, ItemId, ModelRef, TextItem, type ExtractRequest } from '../../../adapters/protocol/requests.js';
import type { ExtractedItem } from '../../../adapters/protocol/results.js';
import type { CliApp } from '../app.js';
import { addImageOptions, addLineIoOptions, CommaListFlag, ImageFlags, imagePolicyFromFlags, LineIoFlags, lineIo, parseFlags, UnitIntervalFlag } from '../line-options.js';

/**
 * `shoal extract`: `{"id","text"}` lines → `{"id","entities":[...]}` with character offsets into
 * the line's text. Token-classification models group tokens with the `simple` strategy unless
 * --aggregation says otherwise; zero-shot models (GLiNER) take their entity types from --labels.
 */

const ExtractLine = z
  .object({
    id: ItemId.optional(),
    text: TextItem.shape.text.optional(),
    /** An image path (inside the image roots), http(s) URL (allowed hosts) or data: URL, for image classifiers. */
    image: ImageItem.shape.image.optional(),
  })
  .refine((line) => (line.text === undefined) !== (line.image === undefined), { message: 'a line needs "text" or "image" (exactly one)', path: ['text'] });
type ExtractLine = z.infer<typeof ExtractLine>;

const ExtractFlags = z.strictObject({
  ...LineIoFlags,
  ...ImageFlags,
  output: z.string().min(1).optional(),
  model: ModelRef,
  labels: CommaListFlag.pipe(z.array(z.string().min(1)).min(1, 'name at least one label')).optional(),
  threshold: UnitIntervalFlag.optional(),
  aggregation: Aggregation.default('simple'),
});

const EXAMPLE = `
Input lines:  {"id": 7, "text": "Angela Merkel visited Paris."}
Output lines: {"id": 7, "entities": [{"text": "Angela Merkel", "label": "PER", "score": 0.99, "start": 0, "end": 13}, ...]}
              start/end are character offsets (UTF-16 code units) into "text": text.slice(start, end).

Examples:
  $ shoal extract --model dslim/bert-base-NER -i articles.jsonl -o entities.jsonl
  $ shoal extract --model dslim/bert-base-NER --aggregation first < articles.jsonl
  $ shoal extract --model urchade/gliner_small-v2.1 --labels person,city --threshold 0.5 < articles.jsonl
  $ echo '{"id":"p1","image":"photos/teapot.jpg"}' | shoal extract --model ./mobilenetv2-12-int8   (→ "labels": [{"label","score"}, ...])`;

function resultLine(id: ItemId, item: ExtractedItem | undefined): object {
  const line: Record<string, unknown> = { id };
  if (item?.labels !== undefined) line.labels = item.labels;
  if (item?.entities !== undefined || item?.labels === undefined) line.entities = item?.entities ?? [];
  if (item?.text !== undefined) line.text = item.text;
  return line;
}

export function registerExtract(program: Command, app: CliApp): void {
  const command = program
    .command('extract')
    .summary('named entities (token classification, GLiNER) with character offsets')
    .description('Extract entities from each {"id","text"} line.')
    .requiredOption('-m, --model <model>', 'model: catalog name, hub id (org/name[@revision]) or local folder')
    .option('--labels <list>', 'entity types for zero-shot models, comma-separated (ignored by fixed-label models)')
    .option('--threshold <x>', 'minimum entity score, 0 to 1 (default: the model family\'s own)')
    .option('--aggregation <strategy>', 'how tokens merge into entities: simple, first or none (default: simple)');
  addLineIoOptions(command, { outputFlagIsFile: true });
  addImageOptions(command);
  command.addHelpText('after', EXAMPLE);
  command.action(async (_options: unknown, self: Command) => {
    const flags = parseFlags(ExtractFlags, self);
    await app.runLines<ExtractLine>(self, lineIo(flags), (engine) => ({
      schema: ExtractLine,
      run: async (lines, signal) => {
        const request: ExtractRequest = {
          model: flags.model,
          items: lines.map(({ value }) => (value.image === undefined ? { text: value.text ?? '' } : { image: value.image })),
          labels: flags.labels,
          threshold: flags.threshold,
          aggregation: flags.aggregation,
          max_length: flags.maxLength,
          priority: 'bulk',
        };
        const result = await engine.extract(request, { signal });
        const byIndex = new Map(result.items.map((item) => [item.index, item]));
        return lines.map((line, index) => resultLine(line.id, byIndex.get(index)));
      },
    }), { images: imagePolicyFromFlags(flags) });
  });
}
