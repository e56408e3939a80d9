import { copyFile, readdir, stat } from 'node:fs/promises';
import { basename, dirname, join, relative } from 'node:path';
import { Option, type Command } from 'commander';
import { z } from 'zod';
import type { PrecisionInfo } from '../../../adapters/models/precision/precision-info.js';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { ModelRef } from '../../../adapters/protocol/requests.js';
import { parseWith } from '../../../adapters/protocol/validate.js';
import { isMetadataFile } from '../../../adapters/sources/file-selection.js';
import { EMPTY_CATALOG, type Catalog } from '../../../pipelines/inference/catalog.js';
import type { CliApp } from '../app.js';
import { makeDirectory } from '../../../adapters/support/directories.js';

/**
 * `shoal models quantize M [--out DIR]`: quantizes a model's float graph(s) to int8 ahead of time.
 * The work happens where it does at load time, in the model thread of an engine whose catalog
 * entry for M says `precision: int8` (so the result lands in the same cache a server would use),
 * and the command prints sizes before/after and the fidelity check. `--out DIR` writes a model
 * folder (its configuration and tokenizer files plus `onnx/<name>_quantized.onnx`) that any
 * Shoal picks up as a shipped int8 graph. A model the fidelity gate refuses exits with status 1.
 */

const EXAMPLE = `
Examples:
  $ shoal models quantize sentence-transformers/all-MiniLM-L6-v2
  $ shoal models quantize ./models/my-embedder --out ./models/my-embedder-int8
  $ shoal --catalog catalog.yaml models quantize minilm --min-cosine 0.995 --json`;

const Flags = z.strictObject({
  out: z.string().min(1).optional(),
  minCosine: z.coerce.number().gt(0).max(2).optional(),
  minWeightElements: z.coerce.number().int().nonnegative().optional(),
  weights: z.enum(['auto', 'int8', 'uint8']).optional(),
  mergeProjections: z.boolean().optional(),
  fuseAttention: z.boolean().optional(),
  json: z.boolean().optional(),
});

/** The catalog with M's entry (or a new one) forced to int8 and the command's thresholds. */
function int8Catalog(catalog: Catalog, name: string, flags: z.infer<typeof Flags>): Catalog {
  const entry = catalog.entries.get(name) ?? {};
  const quantization = {
    ...entry.quantization,
    ...(flags.minCosine === undefined ? {} : { min_cosine: flags.minCosine }),
    ...(flags.minWeightElements === undefined ? {} : { min_weight_elements: flags.minWeightElements }),
    ...weightsFor(flags),
    ...(flags.mergeProjections === undefined ? {} : { merge_projections: flags.mergeProjections }),
    ...(flags.fuseAttention === undefined ? {} : { fuse_attention: flags.fuseAttention }),
  };
  const entries = new Map(catalog.entries);
  entries.set(name, { ...entry, precision: 'int8', quantization });
  return Object.freeze({ entries });
}

/**
 * The weight storage to quantize with: the flag, else for `--out` the portable `uint8` (the folder
 * may run on another CPU, and int8 weights saturate on AVX2-only ones: int8-weights.ts), else the
 * catalog's setting (default `auto`: what suits this CPU, for this machine's cache).
 */
function weightsFor(flags: z.infer<typeof Flags>): { weights?: 'auto' | 'int8' | 'uint8' } {
  if (flags.weights !== undefined) return { weights: flags.weights };
  return flags.out === undefined ? {} : { weights: 'uint8' };
}

const megabytes = (bytes: number): string => `${(bytes / 1e6).toFixed(1)} MB`;

function describe(component: string, file: string, info: PrecisionInfo): string[] {
  const lines = [`${component} (${file}): ${info.effective}, ${info.origin}`];
  if (info.bytes !== undefined) {
    const ratio = info.bytes.quantized / Math.max(1, info.bytes.source);
    lines.push(`  size: ${megabytes(info.bytes.source)} -> ${megabytes(info.bytes.quantized)} (${ratio.toFixed(2)}x), ${info.rewritten ?? 0} MatMul/Gemm nodes in int8`);
  }
  if (info.fidelity !== undefined) {
    const verdict = info.fidelity.minCosine >= info.fidelity.floor ? 'passed' : 'REFUSED';
    lines.push(`  fidelity: min cosine(fp32, int8) ${info.fidelity.minCosine.toFixed(5)}, floor ${info.fidelity.floor}: ${verdict}`);
    for (const output of info.fidelity.outputs) lines.push(`    ${output.name}: cosine ${output.cosine.toFixed(5)}, max |diff| ${output.maxAbsDiff.toPrecision(3)}`);
  }
  if (info.reason !== undefined) lines.push(`  note: ${info.reason}`);
  if (info.effective === 'int8') lines.push(`  graph: ${info.graph}`);
  return lines;
}

/** `onnx/model.onnx` → `onnx/model_quantized.onnx`. */
function quantizedName(file: string): string {
  return file.replace(/\.onnx$/i, '_quantized.onnx');
}

/** Copies the model's metadata files and the int8 graphs into `out`; returns what was written. */
async function writeModelFolder(out: string, modelDir: string, graphs: { file: string; info: PrecisionInfo }[]): Promise<string[]> {
  const written: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      const rel = relative(modelDir, path).split('\\').join('/');
      if (entry.isDirectory() && !entry.name.startsWith('.')) await walk(path);
      else if ((entry.isFile() || entry.isSymbolicLink()) && isMetadataFile({ path: rel })) {
        await makeDirectory(dirname(join(out, rel)));
        await copyFile(path, join(out, rel));
        written.push(rel);
      }
    }
  };
  await walk(modelDir);
  for (const { file, info } of graphs) {
    const target = join(out, quantizedName(file));
    await makeDirectory(dirname(target));
    await copyFile(info.graph, target);
    written.push(quantizedName(file));
    // A graph past 2 GB keeps its tensors in `<cache key>.onnx.data`, a name written inside the graph: keep it.
    const data = `${basename(info.graph)}.data`;
    const hasData = await stat(join(dirname(info.graph), data)).then(() => true, () => false);
    if (hasData) {
      await copyFile(join(dirname(info.graph), data), join(dirname(target), data));
      written.push(join(dirname(quantizedName(file)), data));
    }
  }
  return written;
}

export function registerModelsQuantize(models: Command, app: CliApp): void {
  models
    .command('quantize')
    .summary('quantize a model to int8 (dynamic, per-column weights) and check its fidelity')
    .description('Quantize the float ONNX graph(s) of a model to int8 in the model cache ($SHOAL_CACHE_DIR/quantized), print sizes and the fp32-vs-int8 fidelity check, and optionally write an int8 model folder.')
    .argument('<model>', 'catalog name, hub id (org/name[@revision]) or local folder')
    .option('-o, --out <dir>', 'write a model folder with the int8 graph (onnx/<name>_quantized.onnx) and the model\'s configuration files')
    .addOption(new Option('--min-cosine <x>', 'fidelity floor: refuse int8 when cosine(fp32, int8) of any output is below it (default: catalog, else 0.99)'))
    .addOption(new Option('--min-weight-elements <n>', 'leave MatMul/Gemm weights with fewer elements in float (default: catalog, else 16384)'))
    .addOption(new Option('--weights <format>', 'how the int8 codes are stored: uint8 (exact on every CPU), int8 (faster on CPUs with VNNI, saturates on AVX2-only ones) or auto (by this CPU); default: uint8 with --out, else the catalog\'s (auto)').choices(['auto', 'int8', 'uint8']))
    .option('--merge-projections', 'one int8 node for projections that read one activation (Q/K/V); same outputs, off by default (no measured gain)')
    .option('--fuse-attention', 'eager self-attention as one MultiHeadAttention node; same outputs, off by default (no measured gain)')
    .option('--json', 'print the report as JSON')
    .addHelpText('after', EXAMPLE)
    .action(async (model: unknown, options: unknown, self: Command) => {
      const name = parseWith(ModelRef, model, 'model argument');
      const flags = parseWith(Flags, options, 'quantize options', ErrorCode.INVALID_INPUT);
      const config = app.config(self);
      const progress = app.progress(config);
      try {
        const report = await app.withEngine(
          config,
          progress,
          async (engine) => {
            const { profile, info } = await engine.inspect(name);
            return { profile, precision: info.precision ?? {} };
          },
          { catalog: (configured) => int8Catalog(configured ?? EMPTY_CATALOG, name, flags) },
        );
        progress.stop();
        const graphs = Object.entries(report.profile.onnx).flatMap(([component, file]) => {
          const info = report.precision[component];
          return info === undefined ? [] : [{ component, file, info }];
        });
        const refused = graphs.filter((g) => g.info.warning !== undefined);
        const quantized = graphs.filter((g) => g.info.effective === 'int8' && g.info.origin !== 'shipped int8 graph');
        const written = flags.out === undefined || refused.length > 0 || quantized.length === 0 ? [] : await writeModelFolder(flags.out, report.profile.dir, quantized);
        if (flags.json === true) {
          app.io.stdout.write(`${JSON.stringify({ model: name, components: Object.fromEntries(graphs.map((g) => [g.component, { file: g.file, ...g.info }])), out: flags.out ?? null, written }, null, 2)}\n`);
        } else {
          const lines = [`model ${name} (${report.profile.dir})`, ...graphs.flatMap((g) => describe(g.component, g.file, g.info))];
          if (written.length > 0) lines.push(`wrote ${flags.out ?? ''}: ${written.filter((f) => f.endsWith('.onnx')).join(', ')} and ${written.length - quantized.length} configuration files`);
          app.io.stdout.write(`${lines.join('\n')}\n`);
        }
        if (refused.length > 0) {
          throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `int8 refused for ${name}: ${refused.map((g) => `${g.component}: ${g.info.warning ?? ''}`).join('; ')}`);
        }
      } finally {
        progress.stop();
      }
    });
}
