import { describe, expect, it } from 'vitest';
import { cpuReport, thisCpuReport } from '../../../../adapters/quantize/cpu-features.js';

/** `shoal models cpu` (issue 40 item 4): the kernels a CPU's flags select, and the weight format picked for it. */

const flags = (...names: string[]): string => `processor\t: 0\nflags\t\t: fpu sse4_1 ${names.join(' ')}\n`;

describe('cpuReport', () => {
  it('names the int8 and fp32 kernels of each x86 generation, widest first', () => {
    expect(cpuReport(flags('avx2', 'fma'), 'x64')).toMatchObject({ int8Kernel: expect.stringMatching(/^AVX2/), fp32Kernel: 'AVX2 + FMA', weightFormat: 'uint8' });
    expect(cpuReport(flags('avx2', 'avx512f', 'avx512bw'), 'x64')).toMatchObject({ int8Kernel: expect.stringMatching(/^AVX-512BW/), fp32Kernel: 'AVX-512F', weightFormat: 'uint8' });
    expect(cpuReport(flags('avx2', 'avx512f', 'avx512bw', 'avx512_vnni'), 'x64')).toMatchObject({ int8Kernel: expect.stringMatching(/^AVX-512 VNNI/), weightFormat: 'int8' });
    expect(cpuReport(flags('avx2', 'avx_vnni'), 'x64')).toMatchObject({ int8Kernel: expect.stringMatching(/^AVX-VNNI/), fp32Kernel: 'AVX2 + FMA', weightFormat: 'int8' });
    expect(cpuReport(flags('avx2', 'avx512f', 'avx512_vnni', 'amx_int8'), 'x64')).toMatchObject({ int8Kernel: 'AMX int8 tiles', isa: { amxInt8: true, avx512Vnni: true }, weightFormat: 'int8' });
  });

  it('falls back to uint8 weights where the flags cannot be read or the CPU is not x86', () => {
    expect(cpuReport(null, 'x64')).toMatchObject({ weightFormat: 'uint8', isa: { avx2: false } });
    expect(cpuReport(flags('avx512_vnni'), 'arm64')).toMatchObject({ weightFormat: 'uint8', int8Kernel: 'NEON (ARM64)' });
  });

  it('reports this machine consistently with the format the quantizer picks', async () => {
    const { nativeWeightFormat } = await import('../../../../adapters/quantize/cpu-features.js');
    expect(thisCpuReport().weightFormat).toBe(nativeWeightFormat());
  });
});
