import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { gitBlobSha1 } from './fake-hub.js';

/**
 * Tiny model repositories written to a temp folder, so download tests run without the shared kit.
 * The "graphs" are deterministic pseudo-random bytes, not real ONNX: these repositories test
 * transport and cache layout, never inference.
 */

/** `length` deterministic bytes derived from `seed` (sha256 in counter mode). */
export function pseudoRandomBytes(seed: string, length: number): Buffer {
  const blocks: Buffer[] = [];
  for (let i = 0; i * 32 < length; i++) blocks.push(createHash('sha256').update(`${seed}:${i}`).digest());
  return Buffer.concat(blocks).subarray(0, length);
}

export type RepoContent = Record<string, string | Buffer>;

/** An Optimum/Xenova-style repository: configs and tokenizer, ONNX variants, and PyTorch weights that must never be fetched. */
export function onnxRepoContent(): RepoContent {
  return {
    'config.json': JSON.stringify({ architectures: ['BertModel'], model_type: 'bert', hidden_size: 32 }, null, 2),
    'tokenizer.json': JSON.stringify({ version: '1.0', model: { type: 'WordPiece', vocab: { '[PAD]': 0, '[UNK]': 1 } } }),
    'tokenizer_config.json': JSON.stringify({ do_lower_case: true, model_max_length: 512 }),
    'special_tokens_map.json': JSON.stringify({ pad_token: '[PAD]', unk_token: '[UNK]' }),
    'vocab.txt': '[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\nworld\n',
    '1_Pooling/config.json': JSON.stringify({ pooling_mode_mean_tokens: true }),
    'README.md': '# synthetic\n',
    'onnx/model.onnx': pseudoRandomBytes('model.onnx', 300 * 1024 + 17),
    'onnx/model_quantized.onnx': pseudoRandomBytes('model_quantized.onnx', 90 * 1024),
    'onnx/model_fp16.onnx': pseudoRandomBytes('model_fp16.onnx', 150 * 1024),
    'pytorch_model.bin': pseudoRandomBytes('pytorch_model.bin', 40 * 1024),
    'model.safetensors': pseudoRandomBytes('model.safetensors', 40 * 1024),
  };
}

/** What Shoal fetches from onnxRepoContent() at fp32, in download order: metadata, then the graph. */
export const ONNX_REPO_FP32_FILES: readonly string[] = [
  '1_Pooling/config.json',
  'README.md',
  'config.json',
  'special_tokens_map.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'vocab.txt',
  'onnx/model.onnx',
];

/** A graph whose weights live in an external-data file beside it. */
export function externalDataRepoContent(): RepoContent {
  return {
    'config.json': JSON.stringify({ model_type: 'bert' }),
    'onnx/model.onnx': pseudoRandomBytes('graph', 2048),
    'onnx/model.onnx_data': pseudoRandomBytes('weights', 200 * 1024),
    'onnx/model_fp16.onnx': pseudoRandomBytes('graph16', 2048),
    'onnx/model_fp16.onnx_data': pseudoRandomBytes('weights16', 100 * 1024),
  };
}

/** A PyTorch-only repository: nothing Shoal can run. */
export function pytorchOnlyRepoContent(): RepoContent {
  return {
    'config.json': JSON.stringify({ model_type: 'bert' }),
    'model.safetensors': pseudoRandomBytes('st', 4096),
    'pytorch_model.bin': pseudoRandomBytes('pt', 4096),
  };
}

export async function writeRepo(dir: string, content: RepoContent): Promise<string> {
  for (const [path, data] of Object.entries(content)) {
    const full = join(dir, path);
    await mkdir(dirname(full), { recursive: true });
    await writeFile(full, data);
  }
  return dir;
}

/** A fresh temp folder (callers remove it in afterAll). */
export function tempDir(prefix: string): Promise<string> {
  return mkdtemp(join(tmpdir(), `shoal-${prefix}-`));
}

/**
 * Writes a hub-cache snapshot by hand, the way huggingface_hub lays it out: content in blobs/,
 * relative links in snapshots/<commit>/, and `refs/<ref>` holding the commit when `ref` is given.
 */
export async function writeSnapshot(cacheDir: string, repo: string, commit: string, files: Record<string, string>, ref?: string): Promise<string> {
  const repoDir = join(cacheDir, `models--${repo.split('/').join('--')}`);
  const snapshot = join(repoDir, 'snapshots', commit);
  for (const [path, content] of Object.entries(files)) {
    const blob = join(repoDir, 'blobs', gitBlobSha1(content));
    await mkdir(dirname(blob), { recursive: true });
    await writeFile(blob, content);
    const link = join(snapshot, path);
    await mkdir(dirname(link), { recursive: true });
    await symlink(relative(dirname(link), blob), link);
  }
  if (ref !== undefined) {
    await mkdir(join(repoDir, 'refs'), { recursive: true });
    await writeFile(join(repoDir, 'refs', ref), commit);
  }
  return snapshot;
}
