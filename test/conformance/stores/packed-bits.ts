/**
 * 0/1 values packed 8 per byte, first in the high bit (binary: minus 128), written here apart
 * from the stores' packing: Chroma and Qdrant hold a binary vector as one 0/1 value per bit.
 */
export function packedBits(bits: readonly number[], type: string): number[] {
  const bytes = (bits.map((bit) => (bit > 0.5 ? '1' : '0')).join('').match(/.{1,8}/g) ?? []).map((group) => parseInt(group.padEnd(8, '0'), 2));
  return type === 'binary' ? bytes.map((byte) => byte - 128) : bytes;
}
