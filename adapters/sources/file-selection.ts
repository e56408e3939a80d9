/**
 * Which files of a model repository Shoal needs: the small configuration and tokenizer files, and
 * one ONNX graph per component (model, text_model, vision_model...) in the wanted precision with
 * its external-data files. PyTorch/TF/Flax weights and other ONNX variants are never fetched.
 */

export type Precision = 'fp32' | 'int8' | 'fp16' | 'q4';

const METADATA_EXT = /\.(json|txt|model|metadata|tsv|yaml|yml|vocab|spm|md)$/i;
const WEIGHT_EXT = /\.(bin|safetensors|h5|msgpack|ot|pt|pth|ckpt|tflite|mlmodel|pb|gguf|npz|xml)$/i;
/** Metadata above this size (bytes) is not fetched: no config or tokenizer file is this large. */
export const MAX_METADATA_BYTES = 64 * 1024 * 1024;

const PRECISION_SUFFIX = /_(quantized|int8|uint8|qint8|quint8|fp16|f16|q4|q4f16|bnb4|o[1-4])$/i;
/** Suffixes of each precision, in order of preference (`_quantized` is what Optimum and Xenova ship as "the" int8 graph). */
const WANTED_SUFFIXES: Readonly<Record<Exclude<Precision, 'fp32'>, readonly string[]>> = {
  int8: ['quantized', 'int8', 'uint8', 'qint8', 'quint8'],
  fp16: ['fp16', 'f16'],
  // transformers.js 4-bit exports: MatMulNBits weights with float32 (`q4`) or float16 (`q4f16`) activations.
  q4: ['q4', 'bnb4', 'q4f16'],
};

export interface RepoFile {
  path: string;
  size?: number | undefined;
}

export function isMetadataFile(file: RepoFile): boolean {
  if (WEIGHT_EXT.test(file.path)) return false;
  if (!METADATA_EXT.test(file.path)) return false;
  return file.size === undefined || file.size <= MAX_METADATA_BYTES;
}

function isOnnx(path: string): boolean {
  return path.toLowerCase().endsWith('.onnx');
}

function baseName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1, -'.onnx'.length);
}

function stemOf(path: string): string {
  return baseName(path).replace(PRECISION_SUFFIX, '');
}

/** The precision suffix of a graph (`quantized`, `fp16`...), lower-cased, or '' for a plain float graph. */
function suffixOf(path: string): string {
  return PRECISION_SUFFIX.exec(baseName(path))?.[1]?.toLowerCase() ?? '';
}

/** ONNX files preferring `onnx/` over the repository root, as Optimum/Xenova exports lay them out. */
function folderRank(path: string): number {
  if (path.startsWith('onnx/')) return 0;
  if (!path.includes('/')) return 1;
  return 2;
}

/**
 * How well a graph fits the wanted precision (lower is better): the wanted variant in its order of
 * preference, then the plain float graph (Shoal can quantize it itself), then any other variant so
 * that a repository shipping only, say, `model_q4.onnx` still yields a graph instead of nothing.
 */
function precisionRank(path: string, precision: Precision): number {
  const suffix = suffixOf(path);
  const wanted = precision === 'fp32' ? [] : WANTED_SUFFIXES[precision];
  const position = wanted.indexOf(suffix);
  if (position >= 0) return position;
  if (suffix === '') return wanted.length;
  return wanted.length + 1;
}

/**
 * One ONNX file per component stem (`model`, `text_model`, `vision_model`...), in the wanted
 * precision when the repository ships it.
 */
export function pickOnnxFiles(files: readonly RepoFile[], precision: Precision = 'fp32'): string[] {
  const byStem = new Map<string, string[]>();
  for (const path of files.map((f) => f.path).filter(isOnnx)) {
    const stem = stemOf(path);
    byStem.set(stem, [...(byStem.get(stem) ?? []), path]);
  }
  const chosen: string[] = [];
  for (const candidates of byStem.values()) {
    const [best] = [...candidates].sort(
      (a, b) =>
        precisionRank(a, precision) - precisionRank(b, precision) ||
        folderRank(a) - folderRank(b) ||
        a.length - b.length ||
        a.localeCompare(b),
    );
    if (best !== undefined) chosen.push(best);
  }
  return chosen.sort();
}

/** External-data files that belong to an ONNX file (`model.onnx_data`, `model.onnx.data`, `model.onnx_data_1`...). */
export function externalDataFiles(files: readonly RepoFile[], onnxPath: string): string[] {
  return files
    .map((f) => f.path)
    .filter((p) => p !== onnxPath && (p.startsWith(`${onnxPath}_data`) || p.startsWith(`${onnxPath}.data`)));
}

/**
 * Everything to download for a model, in download order: metadata, then external-data files, then
 * the graphs themselves. Graphs come last on purpose: a cached snapshot that holds an ONNX graph
 * therefore holds everything fetched before it (see hf-cache.ts `isUsableSnapshot`).
 */
export function selectDownloadFiles(files: readonly RepoFile[], precision: Precision = 'fp32'): string[] {
  const metadata = files.filter(isMetadataFile).map((f) => f.path);
  const graphs = pickOnnxFiles(files, precision);
  const data = graphs.flatMap((graph) => externalDataFiles(files, graph));
  return [...new Set([...metadata.sort(), ...data.sort(), ...graphs])];
}
