import { createReadStream } from 'node:fs';
import { z } from 'zod';
import type { ClassifyItem } from '../../../../adapters/protocol/classify.js';
import { ErrorCode, ShoalError } from '../../../../adapters/protocol/errors.js';
import type { Taxonomy } from '../../../../adapters/taxonomy/index.js';
import { goldPath, type Evaluator, type TaxonomyClassifier } from '../../../../pipelines/classify/index.js';
import { readLineChunks, type LineOutput, type LineSource } from '../../jsonl.js';
import { looksLikeId } from '../../line-fields.js';
import { fieldText, hasProductText, productText, textFieldNames, type ProductRecord, type ProductTextSpec } from './products.js';

/**
 * The streaming loop of `shoal classify`: products are read in chunks, each chunk classified
 * while the previous one is written (two in flight keep the engine busy without holding more),
 * results written in input order, one JSON line per product. With --resume the products already
 * in the output are skipped (checked by the id of the last line); with --gold every product's
 * prediction is scored as it is written (and, when resuming, the earlier lines are read back).
 * A product whose text fields are all missing or empty is not classified: its line is
 * `{"id", "error": {"code": "INVALID_INPUT", "message"}}`, in its place, and it counts as failed.
 */

/** What --gold needs of an earlier output line. */
const ResultLine = z.object({ category: z.object({ id: z.string() }) });
/** An earlier output line of a product that had no text (not classified, not evaluated). */
const ErrorLine = z.object({ error: z.object({ code: z.string() }) });

/** Products without text reported one by one on stderr; the rest are only counted. */
export const NO_TEXT_WARNINGS = 5;

export interface ClassifyRunOptions {
  /** The catalog's records, in chunks (products.ts: readProducts, readCheckedProducts). */
  products: AsyncIterable<ProductRecord[]>;
  classifier: TaxonomyClassifier;
  taxonomy: Taxonomy;
  sink: LineOutput;
  /** Where the resumed lines are, to score them with --gold. */
  partialOutput: string | null;
  fields: readonly string[];
  template: string | undefined;
  idField: string;
  imageField: string | undefined;
  goldField: string | undefined;
  evaluator: Evaluator | null;
  signal: AbortSignal;
  /**
   * Products per classify call and write (see WRITE_EVERY). Jobs over NATS keep whole chunks: a
   * slice there is a job, and small jobs cost more than they keep. @default WRITE_EVERY
   */
  writeEvery?: number;
  onProgress(bytes: number, products: number): void;
  onSkipped(bytes: number): void;
  /**
   * Told once when a product lacks the id field but has an id-like one (`uniq_id`): its id is then
   * the record number; and for the first products without text.
   */
  warn?: (message: string) => void;
}

export interface ClassifyRunSummary {
  /** Products classified by this run. */
  products: number;
  /** Products of this run without text: written as error lines, not classified. */
  failed: number;
  /** Products without text among those skipped by --resume (their error lines are in the output already). */
  failedResumed: number;
  skipped: number;
  seconds: number;
}

export function productId(record: ProductRecord, idField: string): string | number {
  const value = record.fields[idField];
  if (typeof value === 'string' && value.length > 0) return value;
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  return record.number;
}

function textSpec(options: Pick<ClassifyRunOptions, 'fields' | 'template'>): ProductTextSpec {
  return { fields: options.fields, template: options.template };
}

export function toItem(record: ProductRecord, options: Pick<ClassifyRunOptions, 'fields' | 'template' | 'idField' | 'imageField'>): ClassifyItem {
  const text = productText(record.fields, options.fields, options.template);
  const image = options.imageField === undefined ? '' : fieldText(record.fields[options.imageField]).trim();
  return { id: productId(record, options.idField), text, ...(image.length > 0 ? { image } : {}) };
}

/** The line commands' "use --id-field" hint (services/cli/line-fields.ts), for catalogs; true once given. */
function idHint(records: readonly ProductRecord[], options: ClassifyRunOptions): boolean {
  for (const record of records) {
    if (record.fields[options.idField] !== undefined) continue;
    const alias = Object.keys(record.fields).find(looksLikeId);
    if (alias === undefined || alias === options.idField) continue;
    options.warn?.(`product ${record.number} has no "${options.idField}" but has "${alias}": ids will be record numbers; pass --id-field ${alias} to keep them (shown once)`);
    return true;
  }
  return false;
}

/** Gold values seen and those naming no category of the taxonomy (they count as misses at every level). */
export interface GoldSeen {
  values: number;
  unknown: number;
  example: string;
}

export function gold(record: ProductRecord, options: Pick<ClassifyRunOptions, 'goldField' | 'taxonomy'>, goldSeen: GoldSeen): string[] | null {
  if (options.goldField === undefined) return null;
  const value = fieldText(record.fields[options.goldField]);
  if (value.trim() === '') return null;
  const path = goldPath(options.taxonomy, value);
  goldSeen.values += 1;
  if (!options.taxonomy.byPath.has(path.join(' > '))) {
    goldSeen.unknown += 1;
    if (goldSeen.example === '') goldSeen.example = value.trim().slice(0, 120);
  }
  return path;
}

/** The output line of a product without text, as an object: its id and an error instead of a category. */
export function noTextError(record: ProductRecord, options: Pick<ClassifyRunOptions, 'fields' | 'template' | 'idField'>): { id: string | number; error: { code: ErrorCode; message: string } } {
  const names = textFieldNames(textSpec(options));
  const source = options.template === undefined ? `--fields ${names.join(',')}` : `the fields of --template (${names.join(', ')})`;
  const message = `no text to classify: ${source} ${names.length === 1 ? 'is' : 'are'} missing or empty in record ${record.number}`;
  return { id: productId(record, options.idField), error: { code: ErrorCode.INVALID_INPUT, message } };
}

function noTextLine(record: ProductRecord, options: ClassifyRunOptions): string {
  return JSON.stringify(noTextError(record, options));
}

/** Predicted paths of the resumed output's lines, one at a time (bounded memory); null for a product that had no text. */
async function* resumedPaths(path: string, taxonomy: Taxonomy): AsyncGenerator<string[] | null> {
  const source: LineSource = { name: path, stream: createReadStream(path, { highWaterMark: 1024 * 1024 }), totalBytes: null };
  try {
    for await (const lines of readLineChunks(source, 256)) {
      for (const line of lines) {
        if (line.text.trim() === '') continue;
        const value: unknown = JSON.parse(line.text);
        if (ErrorLine.safeParse(value).success) {
          yield null;
          continue;
        }
        const parsed = ResultLine.safeParse(value);
        const index = parsed.success ? taxonomy.byId.get(parsed.data.category.id) : undefined;
        yield index === undefined ? [] : [...(taxonomy.categories[index]?.path ?? [])];
      }
    }
  } finally {
    source.stream.destroy();
  }
}

/**
 * Products classified and written at a time within a read chunk (--chunk-lines, 256 by default).
 * A whole chunk used to be one classify call written at its end, so a 200-product catalog was
 * written all at once: a run stopped at 8 s kept nothing, and --resume had nothing to resume.
 * Written every 32, an interrupt loses at most the slices in flight; the engine still batches
 * them (two slices are in flight, so it never waits on a write).
 */
export const WRITE_EVERY = 32;

/** The read chunks cut into slices of at most `size` products, in order. */
async function* slices(chunks: AsyncIterable<ProductRecord[]>, size: number): AsyncGenerator<ProductRecord[]> {
  for await (const chunk of chunks) {
    for (let at = 0; at < chunk.length; at += size) yield chunk.slice(at, at + size);
  }
}

export async function runClassify(options: ClassifyRunOptions): Promise<ClassifyRunSummary> {
  const started = performance.now();
  const goldSeen: GoldSeen = { values: 0, unknown: 0, example: '' };
  const resumed = options.sink.resumed;
  let toSkip = resumed?.lines ?? 0;
  const skippedTotal = toSkip;
  const earlier = toSkip > 0 && options.evaluator !== null && options.partialOutput !== null ? resumedPaths(options.partialOutput, options.taxonomy) : null;
  let written = 0;
  let classifiedCount = 0;
  let failed = 0;
  let failedResumed = 0;
  let hinted = options.warn === undefined;
  let previous: Promise<void> = Promise.resolve();
  try {
    for await (const records of slices(options.products, options.writeEvery ?? WRITE_EVERY)) {
      if (options.signal.aborted) throw new ShoalError(ErrorCode.CANCELLED, 'interrupted');
      let fresh = records;
      if (toSkip > 0) {
        const skipping = records.slice(0, toSkip);
        fresh = records.slice(skipping.length);
        toSkip -= skipping.length;
        for (const record of skipping) {
          if (!hasProductText(record.fields, textSpec(options))) failedResumed += 1;
          const truth = gold(record, options, goldSeen);
          const predicted = earlier === null ? null : await earlier.next();
          if (truth !== null && predicted !== null && predicted.done !== true && predicted.value !== null) options.evaluator?.add(predicted.value, truth);
        }
        const last = skipping.at(-1);
        if (toSkip === 0 && last !== undefined) {
          const id = productId(last, options.idField);
          if (resumed !== null && resumed.lastId !== null && String(resumed.lastId) !== String(id)) {
            throw new ShoalError(
              ErrorCode.INVALID_INPUT,
              `--resume: the output's last line is product ${String(resumed.lastId)}, but product ${skippedTotal} of the input is ${String(id)}: the output belongs to another catalog or order`,
            );
          }
          options.onSkipped(last.endOffset);
        }
      }
      if (fresh.length === 0) continue;
      if (!hinted) hinted = idHint(fresh, options);
      // Products without text get an error line in their place; the others are classified together.
      const withText = fresh.map((record) => hasProductText(record.fields, textSpec(options)));
      for (const [at, record] of fresh.entries()) {
        if (withText[at] === true) continue;
        failed += 1;
        if (failed <= NO_TEXT_WARNINGS) {
          const names = textFieldNames(textSpec(options)).join(', ');
          options.warn?.(
            `product ${JSON.stringify(productId(record, options.idField))} (record ${record.number}) has no text in ${names}: written as an error line, not classified${failed === NO_TEXT_WARNINGS ? ' (further ones are only counted)' : ''}`,
          );
        }
      }
      const items = fresh.filter((_, at) => withText[at] === true).map((record) => toItem(record, options));
      const classified = options.classifier.classify(items, { signal: options.signal });
      // Settled below, after the previous chunk is written; never an unhandled rejection meanwhile.
      classified.catch(() => undefined);
      await previous;
      const endOffset = fresh.at(-1)?.endOffset ?? 0;
      previous = classified.then(async (results) => {
        let next = 0;
        const lines = fresh.map((record, at) => {
          if (withText[at] !== true) return noTextLine(record, options);
          const result = results[next++];
          if (result === undefined) throw new ShoalError(ErrorCode.INTERNAL, `no classification for product ${record.number}`);
          if (options.evaluator !== null) {
            const truth = gold(record, options, goldSeen);
            const index = options.taxonomy.byId.get(result.category.id);
            if (truth !== null && index !== undefined) options.evaluator.add(options.taxonomy.categories[index]?.path ?? [], truth);
          }
          return JSON.stringify(result);
        });
        await options.sink.write(lines);
        written += lines.length;
        classifiedCount += results.length;
        options.onProgress(endOffset, written);
      });
    }
    await previous;
  } catch (error) {
    // An input error (a bad line) or an interrupt: the chunk in flight is still written, so
    // every product before the error is in the output (and --resume continues after them).
    await previous.catch(() => undefined);
    throw error;
  } finally {
    await earlier?.return(undefined);
  }
  if (toSkip > 0) throw new ShoalError(ErrorCode.INVALID_INPUT, `--resume: the output has ${skippedTotal} lines but the input only ${skippedTotal - toSkip} products`);
  if (goldSeen.unknown > 0) {
    // Labels from another tree (a shop's own categories against Shopify's) score as misses: say so, or the evaluation looks like the model's fault.
    options.warn?.(
      `--gold ${options.goldField ?? ''}: ${goldSeen.unknown} of ${goldSeen.values} values name no category of the taxonomy (e.g. ${JSON.stringify(goldSeen.example)}); they count as misses at every level`,
    );
  }
  return { products: classifiedCount, failed, failedResumed, skipped: skippedTotal, seconds: (performance.now() - started) / 1000 };
}
