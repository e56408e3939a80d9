import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { fusePaddleGraph } from '../../adapters/models/ocr/ocr-graph.js';
import { quantizeConvs, type TensorRange } from './ocr-int8-rewrite.js';
import { decodeOnnx, readOnnx, serializeOnnx } from '../../adapters/quantize/onnx-file.js';
import { builtinModelDir } from '../../adapters/sources/builtin-models.js';

/**
 * Which ops onnxruntime runs for the int8 recognizer (bench/lib/ocr-int8-rewrite.ts) after its own
 * graph optimizations: counts of the saved optimized graph's ops, e.g. QLinearConv, Transpose, Q/DQ.
 *
 *   npx tsx bench/lib/ocr-int8-ops.ts RANGES.json   # ranges from ALT=int8 bench/lib/ocr-int8-probe.ts
 */

const dir = builtinModelDir('paddleocr/pp-ocrv4') ?? '';
const loaded = await readOnnx(join(dir, 'ch_PP-OCRv4_rec_infer.onnx'));
fusePaddleGraph(loaded.model);
const ranges = new Map(Object.entries(JSON.parse(await readFile(process.argv[2] ?? '', 'utf8')) as Record<string, TensorRange>));
console.log(quantizeConvs(loaded.model, ranges));
const out = join(mkdtempSync(join(tmpdir(), 'shoal-ocr-int8-')), 'rec-int8-optimized.onnx');
const s = await ort.InferenceSession.create(serializeOnnx(loaded.model, 'x.data').graph, { graphOptimizationLevel: 'all', optimizedModelFilePath: out, intraOpNumThreads: 1 });
await s.release();
const m = decodeOnnx(new Uint8Array(await readFile(out)), out);
const c = new Map<string, number>();
for (const n of m.graph?.node ?? []) c.set(`${n.domain ?? ''}:${n.opType}`, (c.get(`${n.domain ?? ''}:${n.opType}`) ?? 0) + 1);
console.log([...c].sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k}=${v}`).join(' '));
