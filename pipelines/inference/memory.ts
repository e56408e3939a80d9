import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { freemem, totalmem } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { ModelProfile } from '../../adapters/models/profile.js';

/**
 * Memory accounting for the model pool: byte sizes with units, the default budget (a share of the
 * host's or container's memory), and the predicted footprint of a model before it is loaded.
 *
 * Predicted bytes = graph bytes × factor (per provider and precision) + activation workspace for one
 * batch at the token budget. The workspace term was calibrated on all-MiniLM-L6 geometry (384 hidden,
 * 12 heads): RSS grew ~190 MB over the loaded size at a 2,048-token batch budget and ~560 MB at 8,192,
 * i.e. ~70 KB per batch token ≈ hidden × 100 B (layer buffers, FFN) + heads × max length × 12 B
 * (attention scores), plus the output tensor (vocabulary-sized for masked-LM heads such as SPLADE).
 */

const UNITS: Record<string, number> = {
  b: 1,
  k: 1e3,
  kb: 1e3,
  m: 1e6,
  mb: 1e6,
  g: 1e9,
  gb: 1e9,
  t: 1e12,
  tb: 1e12,
  ki: 1024,
  kib: 1024,
  mi: 1024 ** 2,
  mib: 1024 ** 2,
  gi: 1024 ** 3,
  gib: 1024 ** 3,
  ti: 1024 ** 4,
  tib: 1024 ** 4,
};

/** "2GiB", "512MB", "1.5g", "123456" → bytes; "50%" → that share of `total`. */
export function parseBytes(text: string, total: number = totalmem()): number {
  const value = text.trim().toLowerCase();
  const percent = /^(\d+(?:\.\d+)?)\s*%$/.exec(value);
  if (percent !== null) return Math.floor((Number(percent[1]) / 100) * total);
  const match = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/.exec(value);
  const unit = UNITS[match?.[2] === '' || match?.[2] === undefined ? 'b' : match[2]];
  if (match === null || unit === undefined) {
    throw new ShoalError(
      ErrorCode.CONFIG_INVALID,
      `"${text}" is not a memory size: use bytes or a unit (e.g. 2GiB, 512MB, 1.5GB) or a share of RAM (e.g. 60%)`,
    );
  }
  return Math.floor(Number(match[1]) * unit);
}

export function formatBytes(bytes: number): string {
  if (bytes >= 1024 ** 3) return `${(bytes / 1024 ** 3).toFixed(2)} GiB`;
  if (bytes >= 1024 ** 2) return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
  return `${Math.round(bytes / 1024)} KiB`;
}

/** The container's memory limit (cgroup v2 or v1), when one is set. */
export function containerMemoryLimit(): number | null {
  for (const file of ['/sys/fs/cgroup/memory.max', '/sys/fs/cgroup/memory/memory.limit_in_bytes']) {
    try {
      const text = readFileSync(file, 'utf8').trim();
      if (text === 'max') return null;
      const value = Number(text);
      // cgroup v1 reports "no limit" as a huge number.
      if (Number.isFinite(value) && value > 0 && value < 2 ** 60) return value;
    } catch {
      // Not in a container, or no such controller: fall through to the host's memory.
    }
  }
  return null;
}

/** Share of the machine's (or container's) memory given to models when no budget is configured. */
export const DEFAULT_BUDGET_SHARE = 0.5;

/** Share of a GPU's memory given to models when a GPU provider is configured (the rest: CUDA context, workspace). */
export const DEFAULT_GPU_BUDGET_SHARE = 0.8;

/** Total memory of the first NVIDIA GPU (nvidia-smi), or null when there is none or it cannot be read. */
export function gpuMemoryBytes(): number | null {
  try {
    const out = execFileSync('nvidia-smi', ['--query-gpu=memory.total', '--format=csv,noheader,nounits'], {
      encoding: 'utf8',
      timeout: 5000,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const mib = Number(out.trim().split('\n')[0]);
    return Number.isFinite(mib) && mib > 0 ? mib * 1024 * 1024 : null;
  } catch {
    // No driver or no GPU: the caller falls back to host memory.
    return null;
  }
}

/**
 * The budget when none is configured: 80 % of the GPU's memory for GPU providers (model weights
 * and activations live there), else 50 % of the host's or container's memory.
 */
export function defaultMemoryBudget(providers: readonly string[] = ['cpu']): number {
  if (providers.some((p) => p === 'cuda' || p === 'tensorrt')) {
    const gpu = gpuMemoryBytes();
    if (gpu !== null) return Math.floor(gpu * DEFAULT_GPU_BUDGET_SHARE);
  }
  const limit = containerMemoryLimit();
  const total = limit === null ? totalmem() : Math.min(limit, totalmem());
  return Math.floor(total * DEFAULT_BUDGET_SHARE);
}

export function hostMemory(): { total: number; free: number } {
  return { total: totalmem(), free: freemem() };
}

/** Resident bytes per byte of ONNX graph, by provider and weight precision (measured on CPU; GPU: device memory). */
const WEIGHT_FACTORS = {
  cpu: { fp32: 2.0, int8: 2.5 },
  gpu: { fp32: 1.3, int8: 1.3 },
} as const;

/** int8 quantization of a float graph shrinks its MatMul weights about 4× (embeddings stay float). */
const INT8_SIZE_RATIO = 0.35;

export interface PredictOptions {
  /** The engine's batch budget (padded tokens). */
  maxBatchTokens: number;
  /** Providers the session will use. */
  providers: readonly string[];
}

async function graphBytes(profile: ModelProfile): Promise<number> {
  let total = 0;
  for (const file of Object.values(profile.onnx)) {
    const path = join(profile.dir, file);
    total += (await stat(path)).size;
    // External data files sit next to the graph: model.onnx_data, model.onnx.data, model.onnx_data_1...
    const stem = basename(path);
    const siblings = await readdir(dirname(path));
    for (const sibling of siblings) {
      if (sibling !== stem && (sibling.startsWith(`${stem}_data`) || sibling.startsWith(`${stem}.data`))) {
        total += (await stat(join(dirname(path), sibling))).size;
      }
    }
  }
  return total;
}

function usesGpu(providers: readonly string[]): boolean {
  return providers.some((p) => p !== 'cpu');
}

/** Activation workspace of image models (CLIP vision, classifiers, OCR): their batches are few large tensors. */
const IMAGE_ACTIVATION_BYTES = 128 * 1024 * 1024;

/** Bytes of activations for one full batch of `tokens` padded tokens. */
export function activationBytes(profile: ModelProfile, tokens: number): number {
  if (profile.tokenizer === null) return IMAGE_ACTIVATION_BYTES;
  const hidden = profile.dims.hidden ?? 768;
  const heads = profile.dims.heads ?? 12;
  const perToken = hidden * 100 + heads * Math.min(profile.maxLength, 8192) * 12;
  const maskedLm = profile.architecture?.endsWith('ForMaskedLM') === true;
  const output = maskedLm ? (profile.dims.vocab ?? 30522) * 4 : hidden * 4;
  return tokens * (perToken + output);
}

/** Bytes the pool charges for a model before it is loaded. */
export async function predictModelBytes(profile: ModelProfile, options: PredictOptions): Promise<number> {
  if (profile.memory.bytes !== undefined) return profile.memory.bytes;
  const graph = await graphBytes(profile);
  const gpu = usesGpu(options.providers);
  const quantizes = !gpu && (profile.precision === 'int8' || profile.precision === 'auto');
  const alreadyInt8 = Object.values(profile.onnx).some((f) => /_(quantized|int8|uint8|qint8)\.onnx$/i.test(f));
  const weights = quantizes && !alreadyInt8 ? graph * INT8_SIZE_RATIO : graph;
  const factor = profile.memory.factor ?? WEIGHT_FACTORS[gpu ? 'gpu' : 'cpu'][quantizes || alreadyInt8 ? 'int8' : 'fp32'];
  return Math.ceil(weights * factor + activationBytes(profile, options.maxBatchTokens));
}
