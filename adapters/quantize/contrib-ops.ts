/** onnxruntime's contrib-op domain and the ops the int8 rewrite emits (com.microsoft, CPU kernels). */
export const MS_DOMAIN = 'com.microsoft';
/** `DynamicQuantizeMatMul(A, W, scale, zero_point, bias?)`: A quantized to uint8 per call. */
export const QUANTIZED_OP = 'DynamicQuantizeMatMul';
/** `MultiHeadAttention(query, key, value, bias?, key_padding_mask?)`. */
export const ATTENTION_OP = 'MultiHeadAttention';
