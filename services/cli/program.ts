import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { z } from 'zod';
import type { CliApp } from './app.js';
import { registerClassify } from './commands/classify.js';
import { registerDev } from './commands/dev.js';
import { registerEncode } from './commands/encode.js';
import { registerExtract } from './commands/extract.js';
import { registerGateway } from './commands/gateway.js';
import { registerIngest } from './commands/ingest.js';
import { registerModels } from './commands/models.js';
import { registerPipelines } from './commands/pipelines.js';
import { registerScore } from './commands/score.js';
import { registerSearch } from './commands/search.js';
import { registerSink } from './commands/sink.js';
import { registerSubmit } from './commands/submit.js';
import { registerTokenize } from './commands/tokenize.js';
import { registerWorker } from './commands/worker.js';
import { DEFAULT_BATCH_TOKENS, DEFAULT_CHUNK_LINES } from './config.js';

/**
 * The `shoal` command tree: global options (shared by every command, accepted before or after
 * the command name) and one registration per command file. Commander never exits the process
 * itself: its errors are thrown to main.ts, which owns exit codes and the stderr format.
 */

const GENERAL_HELP = `
Input and output:
  Every line command reads JSON Lines (one JSON object per line) from stdin or --input FILE and
  writes one JSON line per input line, in input order, to stdout or --out FILE. Each output line
  carries the input line's "id"; a line without "id" gets its 1-based line number as id. Blank
  lines are skipped (they still count in line numbers); other fields of a line are ignored.
  The first invalid line stops the run after every line before it has been written.

Exit status:
  0 success, 1 runtime failure (model not found, load or inference failed),
  2 bad command line, configuration or input line, 3 some documents failed (shoal ingest),
  130/143 interrupted (SIGINT/SIGTERM).
  Errors are printed on stderr as: error [CODE]: message

Environment:
  SHOAL_CATALOG, SHOAL_MODEL_DIR, SHOAL_THREADS, SHOAL_PROVIDERS, SHOAL_BATCH_TOKENS,
  SHOAL_MEMORY_BUDGET, SHOAL_IMAGE_ROOTS, SHOAL_IMAGE_HOSTS, SHOAL_CHUNK_LINES (flags win);
  HF_HOME / HF_HUB_CACHE (hub cache), HF_TOKEN (gated models),
  HF_ENDPOINT (hub mirror), HF_HUB_OFFLINE=1 or SHOAL_OFFLINE=1 (never download).

Examples:
  $ echo '{"id":1,"text":"hello"}' | shoal encode --model sentence-transformers/all-MiniLM-L6-v2
  $ shoal score --model cross-encoder/ms-marco-MiniLM-L6-v2 -i queries.jsonl -o scores.jsonl
  $ shoal models inspect dslim/bert-base-NER`;

const PackageJson = z.looseObject({ name: z.string(), version: z.string() });

/** The package version, from package.json two (sources) or three (dist/) folders up. */
function packageVersion(): string {
  for (const relative of ['../../package.json', '../../../package.json']) {
    try {
      const parsed = PackageJson.safeParse(JSON.parse(readFileSync(new URL(relative, import.meta.url), 'utf8')));
      if (parsed.success && parsed.data.name === 'shoal') return parsed.data.version;
    } catch {
      // Not at this level; try the next.
    }
  }
  return 'unknown';
}

export function buildProgram(app: CliApp): Command {
  const program = new Command('shoal');
  program
    .description('Run embedding, reranking and extraction models (ONNX, Hugging Face layout) over JSON Lines.')
    .version(packageVersion(), '-V, --version', 'print the version')
    .helpOption('-h, --help', 'show help')
    .exitOverride()
    .configureOutput({
      writeOut: (text) => app.io.stdout.write(text),
      writeErr: (text) => app.io.stderr.write(text),
      // main.ts prints commander's errors in Shoal's own `error [CODE]: message` format.
      outputError: () => undefined,
    })
    .showSuggestionAfterError(true)
    .option('--config <file>', 'settings file (YAML/JSON): keys as in the README settings table, e.g. memoryBudget: 4GiB (env SHOAL_CONFIG; variables and flags win over it)')
    .option('--catalog <path>', 'model catalog: a YAML/JSON file or a folder of one-model files (env SHOAL_CATALOG)')
    .option('--model-dir <dirs>', "folders holding models as org/name/, ':'-separated (env SHOAL_MODEL_DIR)")
    .option('--threads <n>', 'onnxruntime intra-op threads per model (env SHOAL_THREADS; default: all cores)')
    .option('--providers <list>', 'execution providers by preference, e.g. cuda,cpu or webgpu (env SHOAL_PROVIDERS; default: cpu; CPU is always the fallback)')
    .option('--batch-tokens <n>', `padded tokens (longest input × inputs) per model batch (env SHOAL_BATCH_TOKENS; default: ${DEFAULT_BATCH_TOKENS}, 512 for a model running int8, or the catalog's per-model value; 'auto' measures the best budget per model on this machine once)`)
    .option('--memory-budget <size>', 'memory for models: bytes, 2GiB, 60% (env SHOAL_MEMORY_BUDGET; default: half the RAM or of the container limit)')
    .option('--chunk-lines <n>', `input lines handed to the engine at a time (env SHOAL_CHUNK_LINES; default: ${DEFAULT_CHUNK_LINES})`)
    .option('--progress', 'always draw progress bars on stderr (default: only when stderr is a terminal and the input is a file)')
    .option('--no-progress', 'never draw progress bars')
    .option('-q, --quiet', 'print nothing on stderr but errors')
    .addHelpText('after', GENERAL_HELP);

  registerEncode(program, app);
  registerScore(program, app);
  registerExtract(program, app);
  registerTokenize(program, app);
  registerModels(program, app);
  registerWorker(program, app);
  registerSubmit(program, app);
  registerSink(program, app);
  registerGateway(program, app);
  registerDev(program, app);
  registerIngest(program, app);
  registerSearch(program, app);
  registerPipelines(program, app);
  registerClassify(program, app);
  return program;
}
