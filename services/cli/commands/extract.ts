import type { Command } from 'commander';
import { z } from 'zod';
import { Aggregation, ImageItem, ItemId, ModelRef, TextItem, type ExtractRequest } from '../../../adapters/protocol/requests.js';
import type { ExtractedItem } from '../../../adapters/protocol/results.js';
import { EntityOffsets } from '../../../adapters/protocol/entity-offsets.js';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import type { InferenceEngine } from '../../../pipelines/inference/engine.js';
import type { CliApp } from '../app.js';
import { addLineFieldOptions, LineFieldFlags } from '../line-fields.js';
import { addImageOptions, addLineIoOptions, CommaListFlag, ImageFlags, imagePolicyFromFlags, LineIoFlags, lineIo, parseFlags, UnitIntervalFlag } from '../line-options.js';

/**
 * `shoal extract`: `{"id","text"}` lines → `{"id","entities":[...]}` with character offsets into
 * the line's text. Token-classification models group tokens with the `simple` strategy unless
 * --aggregation says otherwise; zero-shot models (GLiNER) take their entity types from --labels.
 * `{"id","image"}` lines → `{"id","labels"}` (image classifiers) or `{"id","text","lines"}` (OCR).
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
  ...LineFieldFlags,
  ...ImageFlags,
  output: z.string().min(1).optional(),
  model: ModelRef,
  labels: CommaListFlag.pipe(z.array(z.string().min(1)).min(1, 'name at least one label')).optional(),
  threshold: UnitIntervalFlag.optional(),
  aggregation: Aggregation.default('simple'),
  offsets: EntityOffsets.optional(),
});

const EXAMPLE = `
Input lines:  {"id": 7, "text": "Angela Merkel visited Paris."}
Output lines: {"id": 7, "entities": [{"text": "Angela Merkel", "label": "PER", "score": 0.99, "start": 0, "end": 13}, ...]}
              start/end are character offsets (UTF-16 code units) into "text": text.slice(start, end).

Examples:
  $ shoal extract --model dslim/bert-base-NER -i articles.jsonl -o entities.jsonl
  $ shoal extract --model dslim/bert-base-NER --aggregation first < articles.jsonl
  $ shoal extract --model urchade/gliner_small-v2.1 --labels person,city --threshold 0.5 < articles.jsonl

Image classification (→ {"id", "labels": [{"label", "score"}, ...]}, best first):
  $ echo '{"id": "p1", "image": "photos/teapot.jpg"}' | shoal extract --model ./mobilenetv2-12-int8
OCR with the built-in PaddleOCR model (→ {"id", "text", "lines": [{"text", "score", "box": [[x, y] x 4]}]}):
  $ echo '{"id": "page1", "image": "scans/page-1.png"}' | shoal extract --model paddleocr/pp-ocrv4
Image paths are read inside the current folder, the folder of the --input file and any --image-root DIR.`;

/**
 * The output line: the item exactly as the engine (and HTTP and NATS) return it, minus its
 * position, under the line's id: `entities` (NER, GLiNER), `labels` (image classifiers) or `text`
 * and `lines` with boxes (OCR). One shape per family on every surface.
 */
function resultLine(id: ItemId, item: ExtractedItem | undefined): object {
  if (item === undefined) return { id };
  const { index: _index, id: _id, ...fields } = item;
  return { id, ...fields };
}

/** GLiNER takes its entity types per request: on the command line that is --labels, said before any line is read. */
async function checkLabels(engine: InferenceEngine, model: string, labels: readonly string[] | undefined): Promise<void> {
  if (labels !== undefined) return;
  const profile = await engine.profile(model);
  if (profile.family === 'gliner') {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `shoal extract: ${model} is a zero-shot extractor (GLiNER): name the entity types to find with --labels, e.g. --labels person,organization,city`);
  }
}

export function registerExtract(program: Command, app: CliApp): void {
  const command = program
    .command('extract')
    .summary('entities (NER, GLiNER), image labels or OCR text per line')
    .description('Extract from each line: entities with character offsets from {"id","text"} (NER, GLiNER), labels or OCR text and lines from {"id","image"} (image classifiers, OCR).')
    .requiredOption('-m, --model <model>', 'model: catalog name, hub id (org/name[@revision]) or local folder')
    .option('--labels <list>', 'entity types for zero-shot models, comma-separated (ignored by fixed-label models)')
    .option('--threshold <x>', 'minimum entity score, 0 to 1 (default: the model family\'s own)')
    .option('--aggregation <strategy>', 'how tokens merge into entities: simple, first or none (default: simple)')
    .option('--offsets <unit>', 'what entity start/end count: utf16 (default, JavaScript string indices) or codepoint (Python string indices)');
  addLineIoOptions(command, { outputFlagIsFile: true });
  addLineFieldOptions(command, { text: true });
  addImageOptions(command);
  command.addHelpText('after', EXAMPLE);
  command.action(async (_options: unknown, self: Command) => {
    const flags = parseFlags(ExtractFlags, self);
    let labelsChecked: Promise<void> | null = null;
    const prepare = app.lineFields(self, flags);
    await app.runLines<ExtractLine>(self, lineIo(flags), (engine) => ({
      schema: ExtractLine,
      prepare,
      itemPerLine: true,
      run: async (lines, signal) => {
        await (labelsChecked ??= checkLabels(engine, flags.model, flags.labels));
        const request: ExtractRequest = {
          model: flags.model,
          items: lines.map(({ value }) => (value.image === undefined ? { text: value.text ?? '' } : { image: value.image })),
          labels: flags.labels,
          threshold: flags.threshold,
          aggregation: flags.aggregation,
          offsets: flags.offsets,
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
