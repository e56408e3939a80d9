/**
 * Which files of a model repository Shoal needs: the small configuration and tokenizer files, and
 * one ONNX graph per component (model, text_model, vision_model...) in the wanted precision with
 * its external-data files. PyTorch/TF/Flax weights and other ONNX variants are never fetched.
 */

export type Precision = 'fp32' | 'int8' | 'fp16';

const METADATA_EXT = /\.(json|txt|model|metadata|tsv|yaml|yml|vocab|spm|md)$/i;
const WEIGHT_EXT = /\.(bin|safetensors|h5|msgpack|ot|pt|pth|ckpt|tflite|mlmodel|pb|gguf|npz|xml)$/i;
/** Metadata above this size (bytes) is not fetched: no config or tokenizer file is this large. */
export const MAX_METADATA_BYTES = 64 * 1024 * 1024;

const PRECISION_SUFFIX = /_(quantized|int8|uint8|qint8|quint8|fp16|f16|q4|q4f16|bnb4|o[1-4])$/i;
const INT8_SUFFIX = /_(quantized|int8|uint8|qint8|quint8)$/i;
const FP16_SUFFIX = /_(fp16|f16)$/i;

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

function stemOf(path: string): string {
  const name = path.slice(path.lastIndexOf('/') + 1, -'.onnx'.length);
  return name.replace(PRECISION_SUFFIX, '');
}

function suffixMatches(path: string, precision: Precision): boolean {
  const name = path.slice(path.lastIndexOf('/') + 1, -'.onnx'.length);
  if (precision === 'int8') return INT8_SUFFIX.test(name);
  if (precision === 'fp16') return FP16_SUFFIX.test(name);
  return !PRECISION_SUFFIX.test(name);
}

/** ONNX files preferring `onnx/` over the repository root, as Optimum/Xenova exports lay them out. */
function folderRank(path: string): number {
  if (path.startsWith('onnx/')) return 0;
  if (!path.includes('/')) return 1;
  return 2;
}

/**
 * One ONNX file per component stem. With `int8`/`fp16`, a shipped variant of that precision is
 * preferred and the float graph is the fallback (Shoal can quantize it itself).
 */
export function pickOnnxFiles(files: readonly RepoFile[], precision: Precision = 'fp32'): string[] {
  const onnx = files.map((f) => f.path).filter(isOnnx);
  const byStem = new Map<string, string[]>();
  for (const path of onnx) {
    const stem = stemOf(path);
    const list = byStem.get(stem) ?? [];
    list.push(path);
    byStem.set(stem, list);
  }
  const chosen: string[] = [];
  for (const candidates of byStem.values()) {
    const ordered = [...candidates].sort((a, b) => folderRank(a) - folderRank(b) || a.length - b.length || a.localeCompare(b));
    const exact = ordered.find((p) => suffixMatches(p, precision));
    const fallback = ordered.find((p) => suffixMatches(p, 'fp32'));
    const pick = exact ?? fallback;
    if (pick !== undefined) chosen.push(pick);
  }
  return chosen.sort();
}

/** External-data files that belong to an ONNX file (`model.onnx_data`, `model.onnx.data`, `model.onnx_data_1`...). */
export function externalDataFiles(files: readonly RepoFile[], onnxPath: string): string[] {
  return files
    .map((f) => f.path)
    .filter((p) => p !== onnxPath && (p.startsWith(`${onnxPath}_data`) || p.startsWith(`${onnxPath}.data`)));
}

/** Everything to download for a model: metadata plus the chosen graphs and their data. */
export function selectDownloadFiles(files: readonly RepoFile[], precision: Precision = 'fp32'): string[] {
  const wanted = new Set<string>();
  for (const file of files) if (isMetadataFile(file)) wanted.add(file.path);
  for (const onnx of pickOnnxFiles(files, precision)) {
    wanted.add(onnx);
    for (const data of externalDataFiles(files, onnx)) wanted.add(data);
  }
  return [...wanted].sort();
}
