import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import sharp from 'sharp';
import { cropStrip, padQuad, stripsTensor, stripWidth, uprightQuad, type RgbPixels } from '../../adapters/models/ocr/ocr-crop.js';
import { detectBoxes, scaleBoxes } from '../../adapters/models/ocr/ocr-detect.js';
import { fusePaddleGraph } from '../../adapters/models/ocr/ocr-graph.js';
import { quantizableConvs, quantizeConvs, withExtraOutputs, type TensorRange } from './ocr-int8-rewrite.js';
import { detectorSize, detectorTensor, resizeRgb } from '../../adapters/models/ocr/ocr-input.js';
import { ctcDecode, parseCharset, widthBatches } from '../../adapters/models/ocr/ocr-recognize.js';
import { readOnnx, serializeOnnx } from '../../adapters/quantize/onnx-file.js';
import { createSession, type ort } from '../../adapters/runtime/ort-session.js';
import { resolveRuntimeOptions } from '../../adapters/runtime/runtime-options.js';
import { float32Tensor } from '../../adapters/runtime/tensors.js';
import { builtinModelDir } from '../../adapters/sources/builtin-models.js';
import { renderPage } from '../../test/helpers/pdf-page.js';
import { wordF1 } from '../../test/helpers/word-f1.js';

/**
 * The recognizer alone, current fp32 session against one alternative, on the strips of the four
 * bench pages (detected and cropped once with the model's own functions), interleaved rounds:
 * wall and CPU milliseconds per page, strips read identically, word-F1 of the kept lines.
 *
 *   ALT=int8 npx tsx bench/lib/ocr-int8-probe.ts        # static int8 QDQ recognizer
 *   ALT=int8 RANGES=ranges.json ...                     # reuse a calibration (written to /tmp/ocrx/ranges.json)
 *   ALT_ARENA=1 | ALT_SPIN=1 | ALT_ITEMS=16 ALT_FILL=0.8 | ALT_SQUEEZE=0.75   # fp32 session/batching variants
 *   ALT_HEIGHT=32 RANGES=empty.json   # strips of another height (the graph's fixed 48 made symbolic; '{}' skips calibration)
 *   ROUNDS=3 DIFF=1 (print differing strips)
 *
 * Calibration (int8): min/max of every Conv input and output over the strips of six other pages.
 */

const PDF_DIR = join(process.env.SHOAL_SHARED_DIR ?? '/work/shared', 'data', 'pdfs');
const BENCH = ['pdfplumber__federal-register-2020-17221:1', 'pdfplumber__scotus-transcript-p1:1', '002-trivial-libre-office-writer__002-trivial-libre-office-writer:1', 'pdfplumber__cupertino_usd_4-6-16:1'];
const CALIB = process.env.RANGES ? [] : ['001-trivial__minimal-document:1', '004-pdflatex-4-pages__pdflatex-4-pages:2', '026-latex-multicolumn__multicolumn:1', '011-google-doc-document__google-doc-document:1', 'pdfplumber__la-precinct-bulletin-2014-p1:1', '006-pdflatex-outline__pdflatex-outline:2'];
const rounds = Number(process.env.ROUNDS ?? 3);
const ALT_HEIGHT = Number(process.env.ALT_HEIGHT ?? 48);
const exclude = new Set((process.env.EXCLUDE ?? '').split(',').filter((s) => s !== '').map(Number));
const arena = process.env.ARENA === '1';

const dir = builtinModelDir('paddleocr/pp-ocrv4') ?? '';
const runtime = resolveRuntimeOptions({ intraOpThreads: 2, cpuMemArena: arena });
type Session = ort.InferenceSession;
async function fused(file: string) {
  const loaded = await readOnnx(join(dir, file));
  fusePaddleGraph(loaded.model);
  return loaded.model;
}
async function open(model: Parameters<typeof serializeOnnx>[0]): Promise<Session> {
  return (await createSession(serializeOnnx(model, 'x.data').graph, runtime)).session;
}
const det = await open(await fused('ch_PP-OCRv4_det_infer.onnx'));
const charset = parseCharset(await readFile(join(dir, 'ppocr_keys_v1.txt'), 'utf8'), { space: true });

async function strips(entry: string): Promise<{ name: string; strips: RgbPixels[]; alt: RgbPixels[]; text: string }> {
  const [pdf = '', p = '1'] = entry.split(':');
  const page = await renderPage(join(PDF_DIR, `${pdf}.pdf`), Number(p), 150, 'auto');
  const { data, info } = await sharp(page.png).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  const img: RgbPixels = { data: new Uint8Array(data), width: info.width, height: info.height };
  const size = detectorSize(img.width, img.height, { limitSideLen: 960, limitType: 'max', maxSideLen: 2560 });
  const input = detectorTensor(await resizeRgb(img, size.width, size.height));
  const out = await det.run({ [det.inputNames[0] ?? '']: float32Tensor(input, [1, 3, size.height, size.width]) });
  const t = out[det.outputNames[0] ?? ''];
  const map = { data: t?.data as Float32Array, width: t?.dims[3] ?? 0, height: t?.dims[2] ?? 0 };
  const found = detectBoxes(map, { thresh: 0.3, boxThresh: 0.6, unclipRatio: 1.5, maxCandidates: 1000, minSize: 3 });
  const quads = scaleBoxes(found, { from: map, to: img }).map((box) => padQuad(uprightQuad(box.quad), 0.1));
  const squeeze = Number(process.env.ALT_SQUEEZE ?? 1);
  return {
    name: pdf,
    strips: quads.map((q) => cropStrip(img, q, stripWidth(q, 48, 2400), 48)),
    alt: quads.map((q) => cropStrip(img, q, Math.max(8, Math.round(stripWidth(q, ALT_HEIGHT, 2400) * squeeze)), ALT_HEIGHT)),
    text: page.text,
  };
}

const ALT_ITEMS = Number(process.env.ALT_ITEMS ?? 8);
const ALT_FILL = Number(process.env.ALT_FILL ?? 0.6);
function batchesOf(s: RgbPixels[], items = 8, fill = 0.6) {
  const h = s[0]?.height ?? 48;
  return widthBatches(s.map((x) => x.width), { maxItems: items, maxColumns: items * 640, minWidth: Math.round(128 * h / 48), minFill: fill }).map((b) => {
    const chunk = b.indices.map((i) => s[i]!);
    return { indices: b.indices, dims: [chunk.length, 3, h, b.width], tensor: stripsTensor(chunk, h, b.width) };
  });
}

const bench = [];
for (const e of BENCH) bench.push(await strips(e));
const calib = [];
for (const e of CALIB) calib.push(await strips(e));
console.error('strips', bench.map((b) => b.strips.length), 'calib', calib.map((b) => b.strips.length));

// Calibration
const base = await fused('ch_PP-OCRv4_rec_infer.onnx');
const convs = quantizableConvs(base);
const names = convs.flatMap((c) => [c.input, c.output]);
const calSession = await open(withExtraOutputs(base, process.env.RANGES ? [] : names));
const ranges = new Map<string, TensorRange>();
for (const page of calib) {
  for (const b of batchesOf(page.strips)) {
    const out = await calSession.run({ [calSession.inputNames[0] ?? '']: float32Tensor(b.tensor, b.dims) });
    for (const name of names) {
      const d = out[name]?.data as Float32Array;
      let lo = Infinity, hi = -Infinity;
      for (let i = 0; i < d.length; i++) { const v = d[i]!; if (v < lo) lo = v; if (v > hi) hi = v; }
      const r = ranges.get(name);
      ranges.set(name, { min: Math.min(lo, r?.min ?? Infinity), max: Math.max(hi, r?.max ?? -Infinity) });
    }
  }
}
await calSession.release();
if (process.env.RANGES) for (const [k, v] of Object.entries(JSON.parse(await readFile(process.env.RANGES, 'utf8')) as Record<string, TensorRange>)) ranges.set(k, v);
else await (await import('node:fs/promises')).mkdir('/tmp/ocrx', { recursive: true });
await (await import('node:fs/promises')).writeFile('/tmp/ocrx/ranges.json', JSON.stringify(Object.fromEntries(ranges)));
const qModel = await fused('ch_PP-OCRv4_rec_infer.onnx');
const report = process.env.ALT === 'int8' ? quantizeConvs(qModel, ranges, exclude) : null;
console.error('quantized', report);
const fp32 = await open(base);
const altRuntime = resolveRuntimeOptions({ intraOpThreads: 2, cpuMemArena: process.env.ALT_ARENA === '1', spinning: process.env.ALT_SPIN === '1' });
if (ALT_HEIGHT !== 48) {
  const dim = base.graph?.input?.[0]?.type?.tensorType?.shape?.dim?.[2];
  if (dim) { dim.dimValue = null; dim.dimParam = 'h'; }
}
const altSession = process.env.ALT === 'int8' ? await open(qModel) : (await createSession(serializeOnnx(base, 'x.data').graph, altRuntime)).session;

async function read(session: Session, batches: ReturnType<typeof batchesOf>, n: number) {
  const texts: { text: string; score: number }[] = new Array(n);
  for (const b of batches) {
    const out = await session.run({ [session.inputNames[0] ?? '']: float32Tensor(b.tensor, b.dims) });
    const t = out[session.outputNames[0] ?? ''];
    b.indices.forEach((idx, row) => { texts[idx] = ctcDecode(t?.data as Float32Array, row, t?.dims[1] ?? 0, charset); });
  }
  return texts;
}
const variants = [{ name: 'fp32', s: fp32, items: 8, fill: 0.6, alt: false }, { name: 'alt', s: altSession, items: ALT_ITEMS, fill: ALT_FILL, alt: true }];
for (const v of variants) await read(v.s, batchesOf(bench[0]!.strips), bench[0]!.strips.length);
const times = new Map<string, number[]>();
const cpu = new Map<string, number[]>();
const texts = new Map<string, { text: string; score: number }[]>();
for (let r = 0; r < rounds; r++) {
  for (const page of bench) {
    for (const v of r % 2 === 0 ? variants : [...variants].reverse()) {
      const batches = batchesOf(v.alt ? page.alt : page.strips, v.items, v.fill);
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      const got = await read(v.s, batches, page.strips.length);
      const ms = performance.now() - t0;
      const c = process.cpuUsage(c0);
      const k = `${v.name}|${page.name}`;
      times.set(k, [...(times.get(k) ?? []), ms]);
      cpu.set(k, [...(cpu.get(k) ?? []), (c.user + c.system) / 1000]);
      texts.set(k, got);
    }
  }
}
const med = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)] ?? 0;
for (const page of bench) {
  const a = texts.get(`fp32|${page.name}`)!;
  const b = texts.get(`alt|${page.name}`)!;
  const same = a.filter((x, i) => x.text === b[i]?.text).length;
  const join = (t: { text: string; score: number }[]) => t.filter((x) => x.score >= 0.5).map((x) => x.text).join('\n');
  const fa = wordF1(join(a), page.text).f1, fb = wordF1(join(b), page.text).f1;
  const cols = (items: number, fill: number) => batchesOf(page.strips, items, fill).reduce((a, b) => a + b.dims[0]! * b.dims[3]!, 0);
  console.log(`columns: real ${page.strips.reduce((a, x) => a + Math.max(128, x.width), 0)} base ${cols(8, 0.6)} alt ${batchesOf(page.alt, ALT_ITEMS, ALT_FILL).reduce((a, b) => a + b.dims[0]! * b.dims[3]!, 0)}`);
  console.log(`${page.name.slice(0, 30).padEnd(30)} fp32 ${med(times.get(`fp32|${page.name}`)!).toFixed(0)} ms (cpu ${med(cpu.get(`fp32|${page.name}`)!).toFixed(0)})  alt ${med(times.get(`alt|${page.name}`)!).toFixed(0)} ms (cpu ${med(cpu.get(`alt|${page.name}`)!).toFixed(0)})  same ${same}/${a.length}  F1 ${(fa * 100).toFixed(1)} -> ${(fb * 100).toFixed(1)}`);
  if (process.env.DIFF === '1') a.forEach((x, i) => { if (x.text !== b[i]?.text) console.log(`   ${x.text}\n   ${b[i]?.text}`); });
}
