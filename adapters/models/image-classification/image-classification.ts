import { z } from 'zod';
import type { LabelScore } from '../../protocol/results.js';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { parseWith } from '../../protocol/validate.js';
import type { CreatedSession } from '../../runtime/ort-session.js';
import { float32Tensor, floatOutput, runChecked } from '../../runtime/tensors.js';
import type { FamilyAdapter, ItemOutput, PrepContext, Prepared, PreparedImage, PrepareRequest, RunOptions, Runner, RunnerContext } from '../family.js';
import { findImageInput, readGraphIo, type GraphTensor } from '../graph-io.js';
import { findLabelFile, labelsFromId2Label, parseLabelFile } from './image-labels.js';
import { imageClassificationSpec, singleGraph } from './spec.js';
import { prepareImage } from '../image/image-prep.js';
import { imagenetRecipe, ImagePreprocessing, ImageProcessorConfig, outputSize, recipeFromConfig } from '../image/image-preprocess.js';
import { HfConfig, ModelFolder } from '../model-files.js';
import { l2Normalize } from '../text/pooling.js';

/**
 * Image classification with any ImageNet-style classifier graph: one 4-D float image input (NCHW
 * or NHWC, found by its shape), one [N, classes] output. Labels come from config.json id2label
 * or a label file beside the graph (synset.txt...); preprocessing from preprocessor_config.json,
 * else the ONNX model zoo / torchvision recipe (shorter side to 256, center crop 224, /255,
 * ImageNet mean/std), scaled to the graph's input size. A catalog entry may replace
 * `options.preprocessing` as a whole.
 *
 * - extract → `labels`: the top-k classes (request top_k, else options.topK = 5) with softmax
 *   probabilities, dropping those under the request threshold. A graph that already ends in a
 *   softmax (rows in [0, 1] summing to 1) is not softmaxed twice.
 * - encode → `dense`: the raw class scores (logits, the model's own output) by default, or the
 *   probabilities with options.output = 'probabilities'; L2-normalized only when asked.
 */

export const ImageClassificationOptions = z.strictObject({
  preprocessing: ImagePreprocessing,
  /** Graph input holding the image batch. */
  input: z.string(),
  /** Graph output holding the class scores. */
  scores: z.string(),
  /** 'config.json' (id2label), a label file relative to the model folder, or null (labels are class indexes). */
  labels: z.string().nullable(),
  /** What encode returns. */
  output: z.enum(['logits', 'probabilities']).default('logits'),
  /** Labels returned by extract when the request names no top_k. */
  topK: z.number().int().positive().default(5),
  /** Scheduler cost of one image (as many tokens as a ViT-B/16 sees: 14 × 14 patches + 1). */
  imageCost: z.number().int().positive().default(197),
});
export type ImageClassificationOptions = z.infer<typeof ImageClassificationOptions>;

/** Rows that are already a probability distribution (the graph ends in a softmax). */
const PROBABILITY_SUM_TOLERANCE = 1e-3;

function isScoresOutput(output: GraphTensor): boolean {
  const shape = output.shape;
  if (shape.length === 2) return true;
  // [N, classes, 1, 1] from graphs that end in a 1×1 convolution.
  return shape.length === 4 && shape[2] === 1 && shape[3] === 1;
}

export function softmax(row: Float32Array): Float32Array {
  let max = Number.NEGATIVE_INFINITY;
  for (const v of row) max = Math.max(max, v);
  const out = new Float32Array(row.length);
  let total = 0;
  row.forEach((v, i) => {
    const e = Math.exp(v - max);
    out[i] = e;
    total += e;
  });
  return out.map((v) => v / total);
}

function isDistribution(row: Float32Array): boolean {
  let total = 0;
  for (const v of row) {
    if (!(v >= 0 && v <= 1)) return false;
    total += v;
  }
  return Math.abs(total - 1) <= PROBABILITY_SUM_TOLERANCE;
}

/** Best `k` classes above `threshold`, best first (ties: lower class index first). */
export function topLabels(probabilities: Float32Array, labels: readonly string[], k: number, threshold: number): LabelScore[] {
  const order = Array.from(probabilities.keys())
    .filter((i) => (probabilities[i] ?? 0) >= threshold)
    .sort((a, b) => (probabilities[b] ?? 0) - (probabilities[a] ?? 0) || a - b);
  return order.slice(0, k).map((i) => ({ label: labels[i] ?? String(i), score: probabilities[i] ?? 0 }));
}

async function loadLabels(profile: RunnerContext['profile'], source: string | null): Promise<string[] | null> {
  if (source === null) return null;
  const folder = await ModelFolder.open(profile.dir);
  if (source === 'config.json') {
    const id2label = (await folder.json('config.json', HfConfig))?.id2label;
    if (id2label === undefined) throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${profile.id}: config.json has no id2label`);
    return labelsFromId2Label(id2label, profile.id);
  }
  const text = await folder.text(source);
  if (text === undefined) throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${profile.id}: label file ${source} is not in ${profile.dir}`);
  return parseLabelFile(text);
}

class ClassifierRunner implements Runner {
  readonly info;
  readonly #context: RunnerContext;
  readonly #created: CreatedSession;
  readonly #options: ImageClassificationOptions;
  readonly #labels: readonly string[];

  constructor(context: RunnerContext, created: CreatedSession, options: ImageClassificationOptions, labels: string[] | null, classes: number | null) {
    this.#context = context;
    this.#created = created;
    this.#options = options;
    this.#labels = labels ?? Array.from({ length: classes ?? 0 }, (_, i) => String(i));
    this.info = { provider: created.provider, inputs: [options.input], outputs: [options.scores], dimension: classes ?? labels?.length ?? null };
  }

  /** One forward pass per group of same-sized tensors; rows of class scores in batch order. */
  async #scores(items: PreparedImage[]): Promise<Float32Array[]> {
    const id = this.#context.profile.id;
    const groups = new Map<string, number[]>();
    items.forEach((item, i) => {
      const key = item.dims.join('x');
      groups.set(key, [...(groups.get(key) ?? []), i]);
    });
    const out: Float32Array[] = new Array<Float32Array>(items.length);
    for (const indices of groups.values()) {
      const first = items[indices[0] ?? 0];
      if (first === undefined) continue;
      const size = first.pixels.length;
      const stacked = new Float32Array(size * indices.length);
      indices.forEach((index, k) => stacked.set(items[index]?.pixels ?? new Float32Array(size), k * size));
      const feeds = { [this.#options.input]: float32Tensor(stacked, [indices.length, ...first.dims]) };
      const result = floatOutput(await runChecked(this.#created.session, feeds, id), this.#options.scores, id);
      const width = result.data.length / indices.length;
      if (this.#labels.length > 0 && width !== this.#labels.length) {
        throw new ShoalError(ErrorCode.INFERENCE_FAILED, `${id}: the graph scores ${width} classes but the model has ${this.#labels.length} labels`);
      }
      indices.forEach((index, k) => (out[index] = result.data.slice(k * width, (k + 1) * width)));
    }
    return out;
  }

  async run(batch: Prepared[], options: RunOptions): Promise<ItemOutput[]> {
    const items = batch.map((item) => {
      if (item.kind !== 'image') throw new ShoalError(ErrorCode.INTERNAL, `image-classification received a ${item.kind} item`);
      return item;
    });
    const scores = await this.#scores(items);
    const encode = options.outputs.includes('dense');
    return scores.map((row): ItemOutput => {
      const probabilities = isDistribution(row) ? row : softmax(row);
      if (encode) {
        const vector = this.#options.output === 'probabilities' ? probabilities.slice() : row;
        if (options.normalize === true) l2Normalize(vector);
        return { dense: vector };
      }
      const labels = this.#labels.length > 0 ? this.#labels : Array.from(row.keys(), String);
      return { labels: topLabels(probabilities, labels, options.topK ?? this.#options.topK, options.threshold ?? 0) };
    });
  }

  async release(): Promise<void> {
    await this.#created.session.release();
  }
}

async function prepareClassifier(context: PrepContext, request: PrepareRequest): Promise<Prepared[]> {
  const options = parseWith(ImageClassificationOptions, context.profile.options, `image-classification options of ${context.profile.id}`, ErrorCode.CONFIG_INVALID);
  const out: Prepared[] = [];
  for (const [index, item] of request.items.entries()) out.push(await prepareImage(context, item, index, options.preprocessing, options.imageCost));
  return out;
}

export const imageClassification: FamilyAdapter<'image-classification'> = {
  name: 'image-classification',
  ...imageClassificationSpec,

  async detectOptions(evidence) {
    const graph = singleGraph(evidence) ?? evidence.onnx.model;
    const where = evidence.folder.dir;
    if (graph === undefined) throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${where}: an image classifier is one ONNX graph; found ${Object.values(evidence.onnx).join(', ')}`);
    const io = await readGraphIo(evidence.folder.path(graph));
    const image = findImageInput(io);
    if (image === null) {
      throw new ShoalError(
        ErrorCode.MODEL_LOAD_FAILED,
        `${where}: ${graph} has no 4-D float image input ([N, 3, H, W] or [N, H, W, 3]); inputs: ${io.inputs.map((i) => `${i.name} [${i.shape.map((d) => d ?? '?').join(', ')}]`).join('; ')}`,
      );
    }
    const scores = io.outputs.find(isScoresOutput) ?? (io.outputs.length === 1 ? io.outputs[0] : undefined);
    if (scores === undefined) {
      throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${where}: ${graph} has no [N, classes] output (outputs: ${io.outputs.map((o) => o.name).join(', ')})`);
    }
    const classes = scores.shape[1] ?? null;
    const side = image.height !== null && image.height === image.width ? image.height : 224;
    const fallback = { ...imagenetRecipe(side), layout: image.layout };
    const processor = await evidence.folder.json('preprocessor_config.json', ImageProcessorConfig);
    const preprocessing = processor === undefined ? fallback : recipeFromConfig(processor, fallback);
    const size = outputSize(preprocessing);
    if (image.height !== null && image.width !== null && size !== null && (size.width !== image.width || size.height !== image.height)) {
      throw new ShoalError(
        ErrorCode.MODEL_LOAD_FAILED,
        `${where}: preprocessing yields ${size.width}×${size.height} images but ${graph} takes ${image.width}×${image.height}; fix preprocessor_config.json or set options.preprocessing in the catalog`,
      );
    }
    let labels: string | null = null;
    if (evidence.config?.id2label !== undefined && (classes === null || Object.keys(evidence.config.id2label).length === classes)) labels = 'config.json';
    else labels = (await findLabelFile(evidence.folder, graph, classes))?.file ?? null;
    const tensor = size ?? { width: side, height: side };
    const imageCost = Math.ceil(tensor.width / 16) * Math.ceil(tensor.height / 16) + 1;
    return { preprocessing, input: image.input.name, scores: scores.name, labels, imageCost };
  },

  prepare: prepareClassifier,

  async createRunner(context: RunnerContext): Promise<Runner> {
    const profile = context.profile;
    const options = parseWith(ImageClassificationOptions, profile.options, `image-classification options of ${profile.id}`, ErrorCode.CONFIG_INVALID);
    const labels = await loadLabels(profile, options.labels);
    const created = await context.openSession('model');
    const { inputNames, outputNames } = created.session;
    if (!inputNames.includes(options.input) || !outputNames.includes(options.scores)) {
      await created.session.release();
      throw new ShoalError(
        ErrorCode.MODEL_LOAD_FAILED,
        `${profile.id}: expected input "${options.input}" and output "${options.scores}", the graph has inputs [${inputNames.join(', ')}] and outputs [${outputNames.join(', ')}]`,
      );
    }
    const meta = created.session.outputMetadata.find((m) => m.name === options.scores);
    const width = meta !== undefined && meta.isTensor ? meta.shape[1] : undefined;
    return new ClassifierRunner(context, created, options, labels, typeof width === 'number' ? width : null);
  },
};
