import { stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { z } from 'zod';
import {
  FileFingerprint,
  fingerprint,
  matches,
  readRecord,
  rememberedSha256,
  sha256Text,
  writeFingerprinted,
  writeRecord,
} from './cache-files.js';
import { WEIGHT_FORMATS } from './int8-weights.js';
import { MAPPED_MIN_BYTES } from './mapped-graph.js';
import type { RewriteReport } from './rewrite.js';

/**
 * Get-or-build of an int8 graph: `<cache>/<key>.onnx` where the key hashes the source graph's
 * bytes, the quantizer version and the options, so a model is quantized once per machine (or per
 * shared cache volume). The source is only ever read. A record `<key>.json` beside the graph
 * holds what the rewrite did, the hashes of everything involved (a damaged or partial graph is
 * rebuilt) and, once measured, the fidelity of the int8 graph against the float one.
 */

/** Changes whenever the rewrite would produce different bytes: old cache entries are then ignored. */
// /2: weights stored as uint8 with zero point 128 or as int8 (the `weights` option, part of the key:
// int8-weights.ts WeightFormat); /1 graphs are rebuilt. /3: the opt-in merge and attention
// fusion options (their defaults give /2's bytes; the key changed with the options anyway).
export const QUANTIZER_VERSION = 'shoal-int8-dqmm/3';

/** @default minWeightElements 16384: a 128×128 weight; smaller matmuls gain nothing from int8. */
export const DEFAULT_MIN_WEIGHT_ELEMENTS = 16_384;

export const QuantizeOptions = z.strictObject({
  minWeightElements: z.number().int().nonnegative().default(DEFAULT_MIN_WEIGHT_ELEMENTS),
  /** How the int8 codes are stored (`WeightFormat`); part of the cache key, so both can coexist. */
  weights: z.enum(WEIGHT_FORMATS).default('uint8'),
  /**
   * Opt-in structural rewrites (issue 40 item 3), both giving the same outputs to the bit and both
   * off by default: measured alone on `bench-minilm-l6` (bench/int8-graph.ts), neither moved the
   * raw int8 throughput beyond round-to-round noise with onnxruntime 1.30's CPU kernels.
   * `mergeProjections`: one DynamicQuantizeMatMul for projections reading one activation (Q/K/V;
   * merge-projections.ts). `fuseAttention`: eager self-attention as MultiHeadAttention (fuse-attention.ts).
   */
  mergeProjections: z.boolean().default(false),
  fuseAttention: z.boolean().default(false),
});
export type QuantizeOptions = z.output<typeof QuantizeOptions>;
export type QuantizeOptionsInput = z.input<typeof QuantizeOptions>;

export const OutputFidelity = z.strictObject({ name: z.string(), cosine: z.number(), maxAbsDiff: z.number() });
export type OutputFidelity = z.infer<typeof OutputFidelity>;

/** How close the int8 graph's outputs came to the float graph's on the calibration inputs. */
export const FidelityRecord = z.strictObject({
  /** Which calibration inputs were used (a change re-measures, it does not rebuild). */
  calibration: z.string(),
  outputs: z.array(OutputFidelity),
  /** The lowest cosine over all float outputs: what the floor is compared with. */
  minCosine: z.number(),
});
export type FidelityRecord = z.infer<typeof FidelityRecord>;

const Report = z.strictObject({
  matmul: z.number().int(),
  gemm: z.number().int(),
  skippedSmall: z.number().int(),
  skippedOther: z.number().int(),
  floatWeightBytes: z.number().int(),
  int8WeightBytes: z.number().int(),
  mergedGroups: z.number().int().default(0),
  mergedNodes: z.number().int().default(0),
  fusedAttention: z.number().int().default(0),
});

export const QuantizedRecord = z.strictObject({
  format: z.literal(1),
  quantizer: z.string(),
  options: QuantizeOptions,
  source: z.strictObject({ graph: FileFingerprint, external: z.array(FileFingerprint) }),
  /** null: nothing was rewritten (no eligible weight, or an already quantized graph): the source is used as is. */
  output: z.strictObject({ graph: FileFingerprint, external: FileFingerprint.nullable() }).nullable(),
  alreadyQuantized: z.boolean(),
  /** Vocabulary size of the `input_ids` embedding table, when the graph has one (for calibration inputs). */
  inputVocab: z.number().int().positive().nullable(),
  report: Report,
  fidelity: FidelityRecord.nullable(),
});
export type QuantizedRecord = z.infer<typeof QuantizedRecord>;

export interface QuantizedGraph {
  key: string;
  sourcePath: string;
  /** The file to load: the int8 graph, or the source itself when nothing was rewritten. */
  path: string;
  recordPath: string;
  /** false: served from the cache. */
  built: boolean;
  record: QuantizedRecord;
  /** Graph plus external data, before and after. */
  sourceBytes: number;
  outputBytes: number;
}

function sizes(record: QuantizedRecord): { sourceBytes: number; outputBytes: number } {
  const sourceBytes = record.source.graph.bytes + record.source.external.reduce((sum, f) => sum + f.bytes, 0);
  const output = record.output;
  const outputBytes = output === null ? sourceBytes : output.graph.bytes + (output.external?.bytes ?? 0);
  return { sourceBytes, outputBytes };
}

async function validHit(record: QuantizedRecord, sourceDir: string, cacheDir: string): Promise<boolean> {
  for (const print of record.source.external) if (!(await matches(sourceDir, print))) return false;
  if (record.output === null) return true;
  if (!(await matches(cacheDir, record.output.graph))) return false;
  return record.output.external === null || (await matches(cacheDir, record.output.external));
}

/**
 * A record written before cached graphs were fingerprinted with their times, just verified by
 * hashing them: the times are added so that later loads check size and time instead.
 */
async function withOutputTimes(record: QuantizedRecord, cacheDir: string, recordPath: string): Promise<QuantizedRecord> {
  const output = record.output;
  const timedAlready = (print: FileFingerprint | null): boolean => print === null || print.mtimeMs !== undefined;
  if (output === null || (timedAlready(output.graph) && timedAlready(output.external))) return record;
  const timed = async (print: FileFingerprint): Promise<FileFingerprint> => ({ ...print, mtimeMs: (await stat(join(cacheDir, print.file))).mtimeMs });
  const upgraded: QuantizedRecord = { ...record, output: { graph: await timed(output.graph), external: output.external === null ? null : await timed(output.external) } };
  await writeRecord(recordPath, upgraded).catch(() => undefined);
  return upgraded;
}

export interface QuantizeRequest {
  /** The float .onnx file (its external data, if any, next to it). */
  source: string;
  options?: QuantizeOptionsInput;
  /** Folder of the quantized graphs: `quantizedCacheDir(runtime.cacheDir)`. */
  cacheDir: string;
}

/** The int8 graph of `source`, from the cache or built now (and then cached). */
export async function quantizeToCache(request: QuantizeRequest): Promise<QuantizedGraph> {
  const options = QuantizeOptions.parse(request.options ?? {});
  const cacheDir = request.cacheDir;
  const sourceDir = dirname(request.source);
  const sourceSha = await rememberedSha256(request.source, cacheDir);
  const key = sha256Text(`${QUANTIZER_VERSION}\n${JSON.stringify(options)}\n${sourceSha}`);
  const recordPath = join(cacheDir, `${key}.json`);
  const graphName = `${key}.onnx`;

  const cached = await readRecord(recordPath, QuantizedRecord);
  if (cached !== null && cached.quantizer === QUANTIZER_VERSION && cached.source.graph.sha256 === sourceSha && (await validHit(cached, sourceDir, cacheDir))) {
    const record = await withOutputTimes(cached, cacheDir, recordPath);
    const path = record.output === null ? request.source : join(cacheDir, record.output.graph.file);
    return { key, sourcePath: request.source, path, recordPath, built: false, record, ...sizes(record) };
  }

  // Imported only to build: the ONNX protobuf code (onnx-proto, protobufjs) costs every load of a
  // cached graph, and every `shoal` start that reads the quantize settings, about 0.1 s otherwise.
  const [{ readOnnx, serializeOnnx }, { embeddingRows }, { isQuantizedGraph, quantizeModel }] = await Promise.all([
    import('./onnx-file.js'),
    import('./graph-facts.js'),
    import('./rewrite.js'),
  ]);
  const loaded = await readOnnx(request.source);
  const external = await Promise.all(loaded.externalFiles.map((file) => fingerprint(sourceDir, file, true)));
  const alreadyQuantized = isQuantizedGraph(loaded.model);
  const inputVocab = embeddingRows(loaded.model);
  const report: RewriteReport = alreadyQuantized
    ? { matmul: 0, gemm: 0, skippedSmall: 0, skippedOther: 0, floatWeightBytes: 0, int8WeightBytes: 0, mergedGroups: 0, mergedNodes: 0, fusedAttention: 0 }
    : quantizeModel(loaded.model, options);
  let output: QuantizedRecord['output'] = null;
  if (report.matmul + report.gemm > 0) {
    const externalName = `${graphName}.data`;
    // A large graph keeps its weights in a page-aligned external-data file that onnxruntime maps
    // rather than copies (see mapped-graph.ts); a small one stays self-contained.
    const serialized = serializeOnnx(loaded.model, externalName, MAPPED_MIN_BYTES);
    let externalPrint: FileFingerprint | null = null;
    if (serialized.external !== null) externalPrint = await writeFingerprinted(cacheDir, externalName, serialized.external);
    // With their times: a load then checks the cached graph by size and time instead of hashing
    // it again (58 MB for MiniLM-L6, about 70 ms); a damaged or replaced file differs in one of them.
    output = { graph: await writeFingerprinted(cacheDir, graphName, [serialized.graph]), external: externalPrint };
  }
  const record: QuantizedRecord = {
    format: 1,
    quantizer: QUANTIZER_VERSION,
    options,
    source: { graph: { file: basename(request.source), bytes: loaded.bytes, sha256: sourceSha }, external },
    output,
    alreadyQuantized,
    inputVocab,
    report,
    fidelity: null,
  };
  await writeRecord(recordPath, record);
  const path = output === null ? request.source : join(cacheDir, graphName);
  return { key, sourcePath: request.source, path, recordPath, built: true, record, ...sizes(record) };
}

/** Stores a fidelity measurement in the graph's record, so later loads need not repeat it. */
export async function saveFidelity(graph: QuantizedGraph, fidelity: FidelityRecord): Promise<QuantizedGraph> {
  const record: QuantizedRecord = { ...graph.record, fidelity };
  await writeRecord(graph.recordPath, record);
  return { ...graph, record };
}
