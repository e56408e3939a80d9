import { readFileSync } from 'node:fs';
import { arch } from 'node:os';
import type { WeightFormat } from './int8-weights.js';

/**
 * Which int8 weight storage suits this CPU (the reasons are at `WeightFormat`): `int8` on x86
 * CPUs with VNNI (AVX-512 VNNI, AVX-VNNI or AMX: onnxruntime's u8s8 kernel accumulates in int32
 * there, fast and exact), `uint8` everywhere else (exact on every CPU). Read once per process from
 * the kernel's CPU flags; where they cannot be read (not Linux) the safe choice, `uint8`, is made.
 */

const VNNI_FLAGS = ['avx512_vnni', 'avx_vnni', 'amx_int8'];

/** The flags line of /proc/cpuinfo as a set, or null where there is none to read. */
export function cpuFlags(cpuinfo: string): Set<string> | null {
  const line = cpuinfo.split('\n').find((l) => /^flags\s*:/.test(l));
  if (line === undefined) return null;
  return new Set(line.slice(line.indexOf(':') + 1).trim().split(/\s+/));
}

/** The weight format for a CPU with these flags on this architecture. */
export function weightFormatFor(flags: Set<string> | null, architecture: string): WeightFormat {
  if (architecture !== 'x64' || flags === null) return 'uint8';
  return VNNI_FLAGS.some((flag) => flags.has(flag)) ? 'int8' : 'uint8';
}

let detected: WeightFormat | undefined;

/** This machine's weight format (see the module comment). */
export function nativeWeightFormat(): WeightFormat {
  if (detected !== undefined) return detected;
  let flags: Set<string> | null = null;
  try {
    flags = cpuFlags(readFileSync('/proc/cpuinfo', 'utf8'));
  } catch {
    flags = null;
  }
  detected = weightFormatFor(flags, arch());
  return detected;
}

/** The x86 instruction sets onnxruntime's CPU kernels (MLAS) choose between, as this CPU has them. */
export interface CpuReport {
  architecture: string;
  /** Present on this CPU (from the kernel's flags; all false where they cannot be read). */
  isa: { avx2: boolean; avx512f: boolean; avx512bw: boolean; avx512Vnni: boolean; avxVnni: boolean; amxInt8: boolean };
  /** The int8 matrix-multiply path MLAS takes here, widest first. */
  int8Kernel: string;
  /** The float32 GEMM path. */
  fp32Kernel: string;
  /** How Shoal stores int8 weights for this CPU (`nativeWeightFormat`). */
  weightFormat: WeightFormat;
  /** Why that format. */
  reason: string;
}

/**
 * What `shoal models cpu` prints and the benches record beside their figures: which kernels the
 * CPU lets onnxruntime run, and the weight format Shoal picks for it. MLAS dispatches on the same
 * CPUID bits at start-up: AMX tiles, then AVX-512 VNNI or AVX-VNNI (u8s8 dot products accumulating
 * in int32), then AVX-512BW or AVX2 (pmaddubsw, whose 16-bit intermediate saturates u8s8 products,
 * hence uint8 weights there).
 */
export function cpuReport(cpuinfo: string | null, architecture: string = arch()): CpuReport {
  const flags = cpuinfo === null ? null : cpuFlags(cpuinfo);
  const has = (flag: string): boolean => flags?.has(flag) === true;
  const isa = { avx2: has('avx2'), avx512f: has('avx512f'), avx512bw: has('avx512bw'), avx512Vnni: has('avx512_vnni'), avxVnni: has('avx_vnni'), amxInt8: has('amx_int8') };
  const x64 = architecture === 'x64' && flags !== null;
  const int8Kernel = !x64
    ? architecture === 'arm64' ? 'NEON (ARM64)' : 'portable'
    : isa.amxInt8 ? 'AMX int8 tiles'
      : isa.avx512Vnni ? 'AVX-512 VNNI (u8s8, int32 accumulation)'
        : isa.avxVnni ? 'AVX-VNNI (u8s8, int32 accumulation)'
          : isa.avx512bw ? 'AVX-512BW (u8u8; u8s8 saturates in 16 bits)'
            : isa.avx2 ? 'AVX2 (u8u8; u8s8 saturates in 16 bits)' : 'SSE4.1';
  const fp32Kernel = !x64 ? (architecture === 'arm64' ? 'NEON (ARM64)' : 'portable') : isa.avx512f ? 'AVX-512F' : isa.avx2 ? 'AVX2 + FMA' : 'SSE';
  const weightFormat = weightFormatFor(flags, architecture);
  const reason = weightFormat === 'int8'
    ? 'VNNI: the u8s8 kernel (VPDPBUSD) accumulates uint8 × int8 straight into int32, exact and the fastest here (raw int8 ceiling 1.89× fp32 with int8 weights, 1.41× with uint8, on a 2-core EPYC with AVX-512 VNNI)'
    : x64 ? 'no VNNI: the u8s8 kernel (VPMADDUBSW) sums uint8 × int8 products into a saturating int16, so weights are stored as uint8 for the u8u8 kernel, which cannot saturate' : 'not x86 (or flags unreadable): unsigned weights, exact on every CPU';
  return { architecture, isa, int8Kernel, fp32Kernel, weightFormat, reason };
}

/** This machine's report (reads /proc/cpuinfo where there is one). */
export function thisCpuReport(): CpuReport {
  let cpuinfo: string | null = null;
  try {
    cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
  } catch {
    cpuinfo = null;
  }
  return cpuReport(cpuinfo);
}
