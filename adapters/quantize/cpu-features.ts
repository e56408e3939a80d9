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
