export { quantizedCacheDir, rememberedSha256, sha256File } from './cache-files.js';
export { embeddingRows } from './graph-facts.js';
export { INT8_LIMIT, quantizeColumns, roundHalfEven, WEIGHT_FORMATS } from './int8-weights.js';
export type { Int8Columns, WeightFormat } from './int8-weights.js';
export { cpuFlags, nativeWeightFormat, weightFormatFor } from './cpu-features.js';
export { MAPPED_LAYOUT_VERSION, MAPPED_MIN_BYTES, mappedCacheDir, mappedGraph } from './mapped-graph.js';
export type { MappedGraph, MappedGraphOptions } from './mapped-graph.js';
export { decodeOnnx, readOnnx, serializeOnnx, SELF_CONTAINED_LIMIT } from './onnx-file.js';
export type { LoadedOnnx, ModelProto, SerializedOnnx } from './onnx-file.js';
export {
  DEFAULT_MIN_WEIGHT_ELEMENTS,
  FidelityRecord,
  OutputFidelity,
  QUANTIZER_VERSION,
  QuantizedRecord,
  QuantizeOptions,
  quantizeToCache,
  saveFidelity,
} from './quantized-cache.js';
export type { QuantizedGraph, QuantizeOptionsInput, QuantizeRequest } from './quantized-cache.js';
export { isQuantizedGraph, MS_DOMAIN, QUANTIZED_OP, quantizeModel } from './rewrite.js';
export type { RewriteOptions, RewriteReport } from './rewrite.js';
export { DEFAULT_MIN_COSINE, QuantizationOverrides, QuantizationSettings, resolveQuantizationSettings } from './settings.js';
