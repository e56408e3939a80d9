import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { parseWith } from '../../protocol/validate.js';
import { describeOutputs, type CreatedSession } from '../../runtime/ort-session.js';
import { float32Tensor, floatOutput, runChecked } from '../../runtime/tensors.js';
import { collateOptionsFor, collateText } from '../text/collate.js';
import type { FamilyAdapter, ItemOutput, PrepContext, Prepared, PreparedImage, PreparedText, PrepareRequest, RunOptions, Runner, RunnerContext } from '../family.js';
import { prepareImage } from '../image/image-prep.js';
import { ImagePreprocessing, ImageProcessorConfig, outputSize, recipeFromConfig } from '../image/image-preprocess.js';
import { Resample } from '../image/image-resample.js';
import { positionPadIdx } from '../model-types.js';
import { l2Normalize } from '../text/pooling.js';
import { prepareTexts } from '../text/text-prep.js';
import { clipSpec, component, TEXT_COMPONENTS, VISION_COMPONENTS } from './spec.js';

/**
 * CLIP-style dual encoders (OpenAI CLIP, LAION/OpenCLIP in the transformers layout) exported as two
 * graphs, the way Xenova/optimum ship them: `text_model.onnx` (input_ids, attention_mask →
 * text_embeds) and `vision_model.onnx` (pixel_values → image_embeds). Texts and images are
 * encoded into the same space and L2-normalized; a batch may mix both, the runner splits it.
 *
 * `score` compares by cosine (the engine's embedding scoring), NOT logit_scale × cosine: the
 * trained logit scale (100 for OpenAI CLIP) is not in the split ONNX files, and a cosine stays
 * comparable across models. CLIP's "logits" are 100 × score and its probabilities the softmax of
 * those over the candidates (test/conformance/clip.test.ts reproduces the kit's from the API).
 */

export const ClipOptions = z.strictObject({
  preprocessing: ImagePreprocessing,
  /** What one image costs the scheduler, in tokens: ViT patches + the class token (50 for ViT-B/32). */
  imageCost: z.number().int().positive(),
  normalize: z.boolean().default(true),
  /** Graph outputs holding the projected embeddings. */
  textOutput: z.string().default('text_embeds'),
  imageOutput: z.string().default('image_embeds'),
});
export type ClipOptions = z.infer<typeof ClipOptions>;

const CLIP_MEAN: [number, number, number] = [0.48145466, 0.4578275, 0.40821073];
const CLIP_STD: [number, number, number] = [0.26862954, 0.26130258, 0.27577711];

/** CLIPImageProcessor's defaults, for a folder without preprocessor_config.json. */
function clipRecipe(side: number): ImagePreprocessing {
  return {
    resize: { mode: 'shortest_edge', size: side },
    resample: Resample.BICUBIC,
    crop: { width: side, height: side },
    cropRounding: 'floor',
    rescale: 1 / 255,
    mean: CLIP_MEAN,
    std: CLIP_STD,
    channelOrder: 'rgb',
    layout: 'chw',
  };
}

const ClipConfig = z.looseObject({
  vision_config: z
    .looseObject({ image_size: z.number().int().positive().optional(), patch_size: z.number().int().positive().optional() })
    .optional(),
});

async function prepareClip(context: PrepContext, request: PrepareRequest): Promise<Prepared[]> {
  const options = parseWith(ClipOptions, context.profile.options, `clip options of ${context.profile.id}`, ErrorCode.CONFIG_INVALID);
  const textAt: number[] = [];
  const out: (Prepared | undefined)[] = new Array<Prepared | undefined>(request.items.length);
  for (const [index, item] of request.items.entries()) {
    if (item.image === undefined) textAt.push(index);
    else out[index] = await prepareImage(context, item, index, options.preprocessing, options.imageCost);
  }
  if (textAt.length > 0) {
    const texts = prepareTexts(context, { ...request, items: textAt.map((index) => request.items[index]).filter((item) => item !== undefined) });
    texts.forEach((prepared, k) => {
      out[textAt[k] ?? -1] = prepared;
    });
  }
  return out.map((prepared, index) => {
    if (prepared === undefined) throw new ShoalError(ErrorCode.INTERNAL, `clip: item ${index} was not prepared`);
    return prepared;
  });
}

function embeddingWidth(created: CreatedSession, output: string, what: string, model: string): number | null {
  if (!created.session.outputNames.includes(output)) {
    throw new ShoalError(
      ErrorCode.MODEL_LOAD_FAILED,
      `${model}: the ${what} graph has no output "${output}" (outputs: ${created.session.outputNames.join(', ')}); set options.${what === 'text' ? 'textOutput' : 'imageOutput'} in the catalog`,
    );
  }
  const last = describeOutputs(created.session).find((o) => o.name === output)?.shape.at(-1);
  return typeof last === 'number' ? last : null;
}

/** Row-major [n, d] output → one vector per row. */
function rows(data: Float32Array, count: number): Float32Array[] {
  const width = data.length / Math.max(count, 1);
  return Array.from({ length: count }, (_, row) => data.slice(row * width, (row + 1) * width));
}

class ClipRunner implements Runner {
  readonly info;
  readonly #context: RunnerContext;
  readonly #options: ClipOptions;
  readonly #text: CreatedSession;
  readonly #vision: CreatedSession;
  readonly #pixelInput: string;

  constructor(context: RunnerContext, options: ClipOptions, text: CreatedSession, vision: CreatedSession) {
    this.#context = context;
    this.#options = options;
    this.#text = text;
    this.#vision = vision;
    const id = context.profile.id;
    const textWidth = embeddingWidth(text, options.textOutput, 'text', id);
    const imageWidth = embeddingWidth(vision, options.imageOutput, 'image', id);
    if (textWidth !== null && imageWidth !== null && textWidth !== imageWidth) {
      throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${id}: text embeddings have ${textWidth} dimensions but image embeddings ${imageWidth}; the two graphs do not belong together`);
    }
    const [pixelInput, ...extra] = vision.session.inputNames;
    if (pixelInput === undefined || extra.length > 0) {
      throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${id}: the vision graph should take one input (pixel_values), it takes [${vision.session.inputNames.join(', ')}]`);
    }
    this.#pixelInput = pixelInput;
    this.info = {
      provider: text.provider,
      inputs: [...text.session.inputNames, pixelInput],
      outputs: [options.textOutput, options.imageOutput],
      dimension: textWidth ?? imageWidth,
    };
  }

  async #encodeTexts(items: PreparedText[]): Promise<Float32Array[]> {
    const profile = this.#context.profile;
    const collated = collateText(items, this.#text.session.inputNames, collateOptionsFor(profile, positionPadIdx(profile)));
    const outputs = await runChecked(this.#text.session, collated.feeds, `${profile.id} (text)`);
    return rows(floatOutput(outputs, this.#options.textOutput, profile.id).data, items.length);
  }

  async #encodeImages(items: PreparedImage[]): Promise<Float32Array[]> {
    const profile = this.#context.profile;
    const [first] = items;
    if (first === undefined) return [];
    const size = first.pixels.length;
    const stacked = new Float32Array(size * items.length);
    items.forEach((item, i) => {
      if (item.pixels.length !== size) throw new ShoalError(ErrorCode.INTERNAL, `${profile.id}: images of different sizes in one batch`);
      stacked.set(item.pixels, i * size);
    });
    const feeds = { [this.#pixelInput]: float32Tensor(stacked, [items.length, ...first.dims]) };
    const outputs = await runChecked(this.#vision.session, feeds, `${profile.id} (vision)`);
    return rows(floatOutput(outputs, this.#options.imageOutput, profile.id).data, items.length);
  }

  async run(batch: Prepared[], options: RunOptions): Promise<ItemOutput[]> {
    const texts: { at: number; item: PreparedText }[] = [];
    const images: { at: number; item: PreparedImage }[] = [];
    batch.forEach((item, at) => {
      if (item.kind === 'text') texts.push({ at, item });
      else if (item.kind === 'image') images.push({ at, item });
      else throw new ShoalError(ErrorCode.INTERNAL, `clip received a ${item.kind} item`);
    });
    const vectors: Float32Array[] = new Array<Float32Array>(batch.length);
    if (texts.length > 0) (await this.#encodeTexts(texts.map((t) => t.item))).forEach((v, k) => (vectors[texts[k]?.at ?? -1] = v));
    if (images.length > 0) (await this.#encodeImages(images.map((t) => t.item))).forEach((v, k) => (vectors[images[k]?.at ?? -1] = v));
    const normalize = options.normalize ?? this.#options.normalize;
    return vectors.map((vector) => {
      if (normalize) l2Normalize(vector);
      return { dense: vector };
    });
  }

  async release(): Promise<void> {
    await Promise.all([this.#text.session.release(), this.#vision.session.release()]);
  }
}

export const clip: FamilyAdapter<'clip'> = {
  name: 'clip',
  ...clipSpec,

  async detectOptions(evidence) {
    const vision = ClipConfig.safeParse(evidence.config ?? {}).data?.vision_config;
    const processor = await evidence.folder.json('preprocessor_config.json', ImageProcessorConfig);
    const side = vision?.image_size ?? 224;
    const preprocessing = processor === undefined ? clipRecipe(side) : recipeFromConfig(processor, clipRecipe(side));
    const size = outputSize(preprocessing) ?? { width: side, height: side };
    const patch = vision?.patch_size ?? 32;
    const imageCost = Math.ceil(size.width / patch) * Math.ceil(size.height / patch) + 1;
    return { preprocessing, imageCost };
  },

  prepare: prepareClip,

  async createRunner(context: RunnerContext): Promise<Runner> {
    const profile = context.profile;
    const options = parseWith(ClipOptions, profile.options, `clip options of ${profile.id}`, ErrorCode.CONFIG_INVALID);
    const textName = component(profile.onnx, TEXT_COMPONENTS);
    const visionName = component(profile.onnx, VISION_COMPONENTS);
    if (textName === undefined || visionName === undefined) {
      throw new ShoalError(
        ErrorCode.MODEL_LOAD_FAILED,
        `${profile.id}: a CLIP model needs separate text and vision graphs (onnx/text_model.onnx and onnx/vision_model.onnx, as Xenova exports ship them); found ${Object.values(profile.onnx).join(', ')}`,
      );
    }
    const text = await context.openSession(textName);
    let vision: CreatedSession | null = null;
    try {
      vision = await context.openSession(visionName);
      return new ClipRunner(context, options, text, vision);
    } catch (error) {
      await Promise.all([text.session.release(), vision?.session.release()]);
      throw error;
    }
  },
};
