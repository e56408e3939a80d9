import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { OcrLine } from '../../protocol/results.js';
import { parseWith } from '../../protocol/validate.js';
import { describeInputs, describeOutputs, type CreatedSession } from '../../runtime/ort-session.js';
import { float32Tensor, floatOutput, runChecked } from '../../runtime/tensors.js';
import { ImagePolicy } from '../../sources/image-input.js';
import type { FamilyAdapter, ItemOutput, PrepContext, Prepared, PreparedImage, PrepareRequest, Runner, RunnerContext } from '../family.js';
import { decodeRgb } from '../image/image-decode.js';
import { cropStrip, padQuad, stripsTensor, stripWidth, stripWindows, turnStrip, uprightQuad, type RgbPixels } from './ocr-crop.js';
import { detectBoxes, scaleBoxes } from './ocr-detect.js';
import type { Quad } from './ocr-geometry.js';
import { detectorSize, detectorTensor, resizeRgb } from './ocr-input.js';
import { pageText, readingRows } from './ocr-order.js';
import { BEST_CLASS_OUTPUTS } from './ocr-graph.js';
import { restoreSpaces } from './ocr-spaces.js';
import { angleSample, checkCharset, ctcDecode, ctcDecodeBest, isUpsideDown, parseCharset, preferWider, widthBatches, type Charset, type Recognized } from './ocr-recognize.js';
import { openStage } from './ocr-session.js';
import { findCharset, findComponents, ocrSpec } from './spec.js';

/**
 * OCR with PaddleOCR-style models (PP-OCRv3/v4): a DB text detector finds line boxes on the page,
 * boxes are cut out as upright strips, an optional angle classifier turns upside-down strips, and
 * a CTC recognizer reads them; lines come back in reading order with the page text. A model
 * folder holds three ONNX graphs told apart by name (`det`, `rec`, `cls` as a word in the file
 * name, e.g. ch_PP-OCRv4_det_infer.onnx, or the catalog's `onnx: {det, rec, cls}`) and the
 * recognizer's charset (a .txt file whose name says keys, dict or charset).
 */

export const OcrOptions = z.strictObject({
  /** ONNX component (key of the profile's `onnx`) of each stage; no `cls` = no angle classification. */
  components: z.strictObject({ det: z.string(), rec: z.string(), cls: z.string().nullable() }),
  /** Charset file, relative to the model folder: one character per line. */
  charset: z.string(),
  /** The recognizer's last class is a space (PaddleOCR `use_space_char`). @default true */
  useSpaceChar: z.boolean().default(true),
  /** Detector input side: the page's longer side is scaled down to it ('max') or its shorter side up to it ('min'). @default 960 */
  limitSideLen: z.number().int().min(32).max(4096).default(960),
  /** @default 'max' */
  limitType: z.enum(['max', 'min']).default('max'),
  /** Longest detector side whatever the limit (memory grows with its square). @default 2560 */
  maxSideLen: z.number().int().min(32).max(4096).default(2560),
  /** Probability above which a map pixel is text. @default 0.3 */
  thresh: z.number().min(0).max(1).default(0.3),
  /** Mean probability a box needs to be kept. @default 0.6 */
  boxThresh: z.number().min(0).max(1).default(0.6),
  /** How far boxes are grown back from DB's shrunk kernels. @default 1.5 */
  unclipRatio: z.number().positive().max(10).default(1.5),
  /** @default 1000 */
  maxCandidates: z.number().int().positive().default(1000),
  /** Smallest box side, in detector pixels. @default 3 */
  minSize: z.number().nonnegative().default(3),
  /** Run the angle classifier (when the model has one). @default true */
  useAngleCls: z.boolean().default(true),
  /**
   * Strips the angle classifier judges first, the widest of the page: when none of them is upside
   * down the page is taken as upright and the other strips are not classified (pages are turned
   * as a whole); when one is, every strip is judged. 0 = judge every strip. On the dense Federal
   * Register page (181 lines) this cuts the classifier's windows from 543 to 48. @default 16
   */
  clsSample: z.number().int().nonnegative().default(16),
  /** Confidence the classifier needs before a strip is turned upside down. @default 0.9 */
  clsThresh: z.number().min(0).max(1).default(0.9),
  /** Lines read with a lower mean character probability are dropped. @default 0.5 */
  dropScore: z.number().min(0).max(1).default(0.5),
  /**
   * Strips per recognizer batch (a batch also holds at most 640 padded columns a strip). It
   * changes what is read, not only how fast: strips are zero-padded to their batch's width and
   * the recognizer's attention sees the padding. Over the Federal Register page (2 threads,
   * paired runs) 16 took 1.2× (CPU arena on) to 1.5× (off) as long as 8; 4 was 1.35× faster with
   * the arena off, but read the Cupertino page at word-F1 90.3 % against 90.9 %. @default 8
   */
  recBatchItems: z.number().int().positive().default(8),
  /** Margin added around each box before it is read, as a share of the box height. @default 0.1 */
  cropPadding: z.number().min(0).max(1).default(0.1),
  /**
   * Narrowest recognizer input: shorter strips are padded to it. PaddleOCR pads every batch to at
   * least 320 (the width the recognizer was trained on); 128 reads the same words on the bench
   * pages and stops line numbers and short words from costing 320 columns each. @default 128
   */
  recMinWidth: z.number().int().min(16).max(4096).default(128),
  /**
   * Word spaces put back: where the recognizer read two characters with no space between them but
   * the strip shows an empty run at least this many times the line's height wide between them
   * (ocr-spaces.ts). PP-OCRv4 runs bold headings and tight lines of English together
   * ("CALLTOORDER"). Over pages 1–2 of the shared PDFs with text (21 pages, 150 dpi), mean word-F1
   * 86.7 → 88.0 % (pdftoppm) and 88.4 → 90.5 % (pdfjs) at 0.35; 0.30 split words on the SCOTUS
   * page, 0.40 and up put back fewer spaces (docs/ocr.md). 0 = as read. @default 0.35
   */
  spaceGap: z.number().min(0).max(4).default(0.35),
  /**
   * Lines read with a mean character probability below this are read a second time from a strip
   * `rereadStretch` times wider, and the second reading is kept when it scores higher without
   * running words together (ocr-recognize.ts preferWider). Narrow letters of small print get
   * less than one recognizer step and are skipped ("itm", "fll", "alloted"). Over pages 1–2 of
   * the shared PDFs with text (21 pages, 150 dpi, pdftoppm) mean word-F1 88.0 → 88.7 %, no page
   * lower, Cupertino 98.0 → 99.4 %, Federal Register p. 2 88.5 → 95.5 %; about a sixth of the
   * lines are read twice (docs/ocr.md). 0 = every line read once. @default 0.96
   */
  rereadBelow: z.number().min(0).max(1).default(0.96),
  /** How much wider than its aspect ratio a line is drawn for its second reading. @default 1.2 */
  rereadStretch: z.number().min(1).max(4).default(1.2),
  /** Longest strip, in pixels at the recognizer's height (longer boxes are squeezed). @default 2400 */
  recMaxWidth: z.number().int().positive().default(2400),
  /**
   * Simplify the float graphs before loading them (exact rewrite, ocr-graph.ts): about 1.5× faster
   * PP-OCRv4 recognition; then 6–16 % off each bench page's time (2 threads) by turning the
   * leftover affines into BatchNormalization, which onnxruntime keeps in its blocked layout, and
   * fetching only the best class per step from the recognizer. @default true
   */
  fuseGraphs: z.boolean().default(true),
  /** Engine batch budget override (read by the engine, not here). */
  maxBatchTokens: z.number().int().positive().optional(),
});
export type OcrOptions = z.infer<typeof OcrOptions>;

/** Recognizer input height when the graph does not fix it; and the classifier's input size. */
const REC_HEIGHT = 48;
/** Padded columns a recognizer batch may hold per item (so a batch of very long lines stays small). */
const REC_COLUMNS_PER_ITEM = 640;
const CLS_HEIGHT = 48;
const CLS_WIDTH = 192;
/** Windows the angle classifier sees of one strip. */
const CLS_WINDOWS = 3;
const CLS_BATCH = 32;
/** Scheduler cost of an image: detector pixels per 16 × 16 patch. */
const COST_PATCH = 256;
const DEFAULT_MAX_PIXELS = ImagePolicy.parse({}).maxPixels;
const NOTHING_READ: Recognized = { text: '', score: 0, chars: [], steps: [] };
function ocrOptions(context: { profile: PrepContext['profile'] }): OcrOptions {
  return parseWith(OcrOptions, context.profile.options, `ocr options of ${context.profile.id}`, ErrorCode.CONFIG_INVALID);
}

function requireImages(batch: readonly Prepared[]): (PreparedImage & { rgb: Uint8Array })[] {
  return batch.map((item) => {
    if (item.kind !== 'image' || item.rgb === undefined) throw new ShoalError(ErrorCode.INTERNAL, 'ocr received an item that is not a prepared page');
    return { ...item, rgb: item.rgb };
  });
}

const round1 = (value: number): number => Math.round(value * 10) / 10;

class OcrRunner implements Runner {
  readonly info;
  readonly #id: string;
  readonly #options: OcrOptions;
  readonly #det: CreatedSession;
  readonly #rec: CreatedSession;
  readonly #cls: CreatedSession | null;
  readonly #charset: Charset;
  readonly #recHeight: number;
  /** The recognizer graph has the per-step best-class outputs (addBestClass). */
  readonly #bestClass: boolean;

  constructor(id: string, options: OcrOptions, sessions: { det: CreatedSession; rec: CreatedSession; cls: CreatedSession | null }, charset: Charset) {
    this.#id = id;
    this.#options = options;
    this.#det = sessions.det;
    this.#rec = sessions.rec;
    this.#cls = sessions.cls;
    this.#charset = charset;
    const recShape = describeInputs(sessions.rec.session)[0]?.shape ?? [];
    const height = recShape[2];
    this.#recHeight = typeof height === 'number' ? height : REC_HEIGHT;
    const classes = describeOutputs(sessions.rec.session)[0]?.shape[2];
    checkCharset(charset, typeof classes === 'number' ? classes : null, id);
    const recOutputs = sessions.rec.session.outputNames;
    this.#bestClass = recOutputs.includes(BEST_CLASS_OUTPUTS.index) && recOutputs.includes(BEST_CLASS_OUTPUTS.prob);
    const stages = Object.entries(sessions).filter((entry): entry is [string, CreatedSession] => entry[1] !== null);
    this.info = {
      provider: sessions.det.provider,
      inputs: stages.flatMap(([stage, created]) => created.session.inputNames.map((name) => `${stage}:${name}`)),
      outputs: stages.flatMap(([stage, created]) => created.session.outputNames.map((name) => `${stage}:${name}`)),
      dimension: null,
    };
  }

  async #runOne(created: CreatedSession, data: Float32Array, dims: number[], stage: string): Promise<{ data: Float32Array; dims: readonly number[] }> {
    const session = created.session;
    const input = session.inputNames[0];
    const output = session.outputNames[0];
    if (input === undefined || output === undefined) throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${this.#id}: the ${stage} graph has no inputs or outputs`);
    const outputs = await runChecked(session, { [input]: float32Tensor(data, dims) }, `${this.#id} (${stage})`);
    return floatOutput(outputs, output, `${this.#id} (${stage})`);
  }

  /** One recognizer batch, fetching only the per-step best class and its probability. */
  async #runBest(data: Float32Array, dims: number[]): Promise<{ index: BigInt64Array; prob: Float32Array; steps: number }> {
    const session = this.#rec.session;
    const what = `${this.#id} (rec)`;
    const outputs = await runChecked(session, { [session.inputNames[0] ?? '']: float32Tensor(data, dims) }, what, [BEST_CLASS_OUTPUTS.index, BEST_CLASS_OUTPUTS.prob]);
    const index = outputs[BEST_CLASS_OUTPUTS.index];
    const prob = outputs[BEST_CLASS_OUTPUTS.prob];
    if (!(index?.data instanceof BigInt64Array) || !(prob?.data instanceof Float32Array)) {
      throw new ShoalError(ErrorCode.INFERENCE_FAILED, `${what}: the best-class outputs are not int64 and float32`);
    }
    return { index: index.data, prob: prob.data, steps: index.dims[1] ?? 0 };
  }

  /** Text boxes on the page, in page pixels. */
  async #detect(page: PreparedImage): Promise<Quad[]> {
    const [, mapHeight = 0, mapWidth = 0] = page.dims;
    const prob = await this.#runOne(this.#det, page.pixels, [1, ...page.dims], 'det');
    const height = prob.dims[2] ?? mapHeight;
    const width = prob.dims[3] ?? mapWidth;
    const found = detectBoxes({ data: prob.data, width, height }, this.#options);
    return scaleBoxes(found, { from: { width, height }, to: { width: page.width, height: page.height } }).map((box) => box.quad);
  }

  /**
   * Which strips the angle classifier finds upside down. Each strip is judged on up to
   * CLS_WINDOWS windows of the classifier's width, at the classifier's height. With `clsSample`,
   * the widest strips are judged first and the rest only when one of them is upside down.
   */
  async #upsideDown(image: RgbPixels, quads: readonly Quad[], strips: readonly RgbPixels[]): Promise<boolean[]> {
    if (this.#cls === null || !this.#options.useAngleCls) return strips.map(() => false);
    const sample = angleSample(strips.map((strip) => strip.width), this.#options.clsSample);
    const sampled = await this.#classify(image, quads, strips, sample);
    // No turned strip among the widest: the page is upright (`sampled` is false everywhere).
    if (sample.length === strips.length || !sampled.includes(true)) return sampled;
    return this.#classify(image, quads, strips, strips.map((_, index) => index));
  }

  /** The classifier's verdict on the strips at `indices`, in page order (false elsewhere). */
  async #classify(image: RgbPixels, quads: readonly Quad[], strips: readonly RgbPixels[], indices: readonly number[]): Promise<boolean[]> {
    const cls = this.#cls;
    if (cls === null) return strips.map(() => false);
    const windows: { strip: number; pixels: RgbPixels }[] = [];
    for (const index of indices) {
      const strip = strips[index];
      const quad = quads[index];
      if (strip === undefined) continue;
      // Recognizer strips are reused when the two graphs share a height (PP-OCR: 48).
      const sized = strip.height === CLS_HEIGHT || quad === undefined ? strip : cropStrip(image, quad, stripWidth(quad, CLS_HEIGHT, this.#options.recMaxWidth), CLS_HEIGHT);
      for (const pixels of stripWindows(sized, CLS_WIDTH, CLS_WINDOWS)) windows.push({ strip: index, pixels });
    }
    const rowsOf = strips.map((): number[] => []);
    const probs = new Float32Array(windows.length * 2);
    for (let start = 0; start < windows.length; start += CLS_BATCH) {
      const chunk = windows.slice(start, start + CLS_BATCH);
      const tensor = stripsTensor(chunk.map((w) => w.pixels), CLS_HEIGHT, CLS_WIDTH);
      const out = await this.#runOne(cls, tensor, [chunk.length, 3, CLS_HEIGHT, CLS_WIDTH], 'cls');
      probs.set(out.data.subarray(0, chunk.length * 2), start * 2);
      chunk.forEach((w, k) => rowsOf[w.strip]?.push(start + k));
    }
    return rowsOf.map((rows) => isUpsideDown(probs, rows, this.#options.clsThresh));
  }

  async #recognize(strips: readonly RgbPixels[]): Promise<Recognized[]> {
    const height = this.#recHeight;
    const results: Recognized[] = strips.map(() => NOTHING_READ);
    const batches = widthBatches(
      strips.map((strip) => strip.width),
      { maxItems: this.#options.recBatchItems, maxColumns: this.#options.recBatchItems * REC_COLUMNS_PER_ITEM, minWidth: this.#options.recMinWidth, minFill: 0.6 },
    );
    for (const batch of batches) {
      const chunk = batch.indices.map((index) => strips[index]).filter((strip): strip is RgbPixels => strip !== undefined);
      const tensor = stripsTensor(chunk, height, batch.width);
      const dims = [chunk.length, 3, height, batch.width];
      if (this.#bestClass) {
        const best = await this.#runBest(tensor, dims);
        batch.indices.forEach((index, row) => {
          results[index] = this.#spaced(ctcDecodeBest(best.index, best.prob, row, best.steps, this.#charset), strips[index], batch.width / best.steps);
        });
        continue;
      }
      const probs = await this.#runOne(this.#rec, tensor, dims, 'rec');
      const steps = probs.dims[1] ?? 0;
      batch.indices.forEach((index, row) => {
        results[index] = this.#spaced(ctcDecode(probs.data, row, steps, this.#charset), strips[index], batch.width / steps);
      });
    }
    return results;
  }

  /** The reading with the word spaces the recognizer left out put back (ocr-spaces.ts); as read when `spaceGap` is 0. */
  #spaced(read: Recognized, strip: RgbPixels | undefined, columnsPerStep: number): Recognized {
    if (this.#options.spaceGap === 0 || strip === undefined) return read;
    return { ...read, text: restoreSpaces(read, strip, columnsPerStep, this.#options.spaceGap) };
  }

  /**
   * Reads every box: upright strips, turned when the classifier says so; a turned strip is also
   * read as it was and the better-scored reading wins, because a wrong turn ruins a line. Lines
   * read with little confidence are then read again from wider strips (#rereadWider).
   */
  async #readBoxes(image: RgbPixels, boxes: readonly Quad[]): Promise<Recognized[]> {
    const height = this.#recHeight;
    const quads = boxes.map((box) => padQuad(uprightQuad(box), this.#options.cropPadding));
    const strips = quads.map((quad) => cropStrip(image, quad, stripWidth(quad, height, this.#options.recMaxWidth), height));
    const turned = await this.#upsideDown(image, quads, strips);
    const candidates = strips.map((strip, index) => (turned[index] === true ? turnStrip(strip) : strip));
    const alternates = strips.filter((_, index) => turned[index] === true);
    const read = await this.#recognize([...candidates, ...alternates]);
    let alternate = strips.length;
    const chosen = strips.map((_, index) => {
      const candidate = read[index] ?? NOTHING_READ;
      if (turned[index] !== true) return { read: candidate, turned: false };
      const asCut = read[alternate++] ?? NOTHING_READ;
      return asCut.score > candidate.score ? { read: asCut, turned: false } : { read: candidate, turned: true };
    });
    return this.#rereadWider(image, quads, chosen);
  }

  /**
   * The lines read with little confidence, read again from wider strips (`rereadBelow`,
   * `rereadStretch`) in the orientation their kept reading had; the wider reading replaces the
   * first where preferWider says so.
   */
  async #rereadWider(image: RgbPixels, quads: readonly Quad[], chosen: readonly { read: Recognized; turned: boolean }[]): Promise<Recognized[]> {
    const { rereadBelow, rereadStretch, recMaxWidth } = this.#options;
    const doubtful = chosen.flatMap((line, index) => (line.read.score < rereadBelow ? [index] : []));
    if (doubtful.length === 0 || rereadStretch === 1) return chosen.map((line) => line.read);
    const height = this.#recHeight;
    const wider = doubtful.map((index) => {
      const quad = quads[index];
      if (quad === undefined) throw new ShoalError(ErrorCode.INTERNAL, 'a line to read again has no box');
      const strip = cropStrip(image, quad, stripWidth(quad, height, recMaxWidth, rereadStretch), height);
      return chosen[index]?.turned === true ? turnStrip(strip) : strip;
    });
    const reread = await this.#recognize(wider);
    const result = chosen.map((line) => line.read);
    doubtful.forEach((index, k) => {
      const second = reread[k] ?? NOTHING_READ;
      const first = result[index] ?? NOTHING_READ;
      if (preferWider(first, second)) result[index] = second;
    });
    return result;
  }

  async #read(page: PreparedImage & { rgb: Uint8Array }): Promise<ItemOutput> {
    const image: RgbPixels = { data: page.rgb, width: page.width, height: page.height };
    const boxes = await this.#detect(page);
    const read = await this.#readBoxes(image, boxes);
    const kept = boxes
      .map((box, index) => ({ box, text: read[index]?.text.trim() ?? '', score: read[index]?.score ?? 0 }))
      .filter((line) => line.text !== '' && line.score >= this.#options.dropScore);
    const rows = readingRows(kept.map((line) => line.box));
    const lines = rows.flat().map((index): OcrLine => {
      const line = kept[index];
      if (line === undefined) throw new ShoalError(ErrorCode.INTERNAL, 'reading order lost a line');
      return { text: line.text, score: line.score, box: line.box.map((p): [number, number] => [round1(p[0]), round1(p[1])]) };
    });
    return { text: pageText(rows, kept.map((line) => line.text)), lines };
  }

  async run(batch: Prepared[]): Promise<ItemOutput[]> {
    const pages = requireImages(batch);
    const outputs: ItemOutput[] = [];
    // One page at a time: detector inputs differ in size, and a page already keeps every core busy.
    for (const page of pages) outputs.push(await this.#read(page));
    return outputs;
  }

  async release(): Promise<void> {
    await Promise.all([this.#det.session.release(), this.#rec.session.release(), this.#cls?.session.release()]);
  }
}

async function preparePage(context: PrepContext, options: OcrOptions, request: PrepareRequest['items'][number]): Promise<PreparedImage> {
  if (request.image === undefined) throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `model ${context.profile.id} (ocr) reads images, not text`);
  const bytes = await context.readImage(request.image);
  const page = await decodeRgb(bytes, { maxPixels: context.maxImagePixels ?? DEFAULT_MAX_PIXELS });
  const size = detectorSize(page.width, page.height, options);
  const resized = await resizeRgb(page, size.width, size.height);
  return {
    kind: 'image',
    pixels: detectorTensor(resized),
    dims: [3, size.height, size.width],
    width: page.width,
    height: page.height,
    cost: Math.ceil((size.width * size.height) / COST_PATCH),
    role: request.role,
    rgb: page.data,
  };
}

export const ocr: FamilyAdapter<'ocr'> = {
  name: 'ocr',
  ...ocrSpec,

  async detectOptions(evidence) {
    const components = findComponents(evidence.onnx);
    const charset = findCharset(evidence.folder.files);
    if (components.det === undefined || components.rec === undefined || charset === undefined) {
      throw new ShoalError(
        ErrorCode.MODEL_LOAD_FAILED,
        `${evidence.folder.dir}: an OCR model needs a detector and a recognizer graph (det/rec in their names, or catalog onnx {det, rec, cls}) and a charset .txt file`,
      );
    }
    return { components: { det: components.det, rec: components.rec, cls: components.cls ?? null }, charset };
  },

  async prepare(context: PrepContext, request: PrepareRequest): Promise<Prepared[]> {
    const options = ocrOptions(context);
    const pages: Prepared[] = [];
    for (const item of request.items) pages.push(await preparePage(context, options, item));
    return pages;
  },

  async createRunner(context: RunnerContext): Promise<Runner> {
    const options = ocrOptions(context);
    const { profile } = context;
    let text: string;
    try {
      text = await readFile(join(profile.dir, options.charset), 'utf8');
    } catch (error) {
      throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${profile.id}: cannot read the charset ${options.charset} in ${profile.dir}`, { cause: error });
    }
    const charset = parseCharset(text, { space: options.useSpaceChar });
    const opened: CreatedSession[] = [];
    const open = async (component: string, bestClass = false): Promise<CreatedSession> => {
      const { created } = await openStage(context, component, options.fuseGraphs, bestClass);
      opened.push(created);
      return created;
    };
    try {
      const det = await open(options.components.det);
      const rec = await open(options.components.rec, true);
      const cls = options.components.cls === null || !options.useAngleCls ? null : await open(options.components.cls);
      return new OcrRunner(profile.id, options, { det, rec, cls }, charset);
    } catch (error) {
      // A stage that failed to load must not leave the others' sessions behind.
      await Promise.allSettled(opened.map((created) => created.session.release()));
      throw error;
    }
  },
};
