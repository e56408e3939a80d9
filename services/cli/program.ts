import { Command } from 'commander';
import { shoalVersion } from '../settings/package-version.js';
import type { CliApp } from './app.js';
import { DEFAULT_BATCH_TOKENS, DEFAULT_CHUNK_LINES } from './config.js';

/**
 * The `shoal` command tree: global options (shared by every command, accepted before or after
 * the command name) and one registration per command file. Commander never exits the process
 * itself: its errors are thrown to main.ts, which owns exit codes and the stderr format.
 *
 * Command files are imported only when needed: a command line that names a command loads that
 * command's file alone (the other thirteen and what they import were about a third of the
 * modules `shoal encode` loaded before its first batch); help, an unknown word or no command
 * loads them all, so the command list and commander's suggestions stay complete.
 */

type Register = (program: Command, app: CliApp) => void;

/** In the order `shoal --help` lists them. */
const COMMANDS: ReadonlyArray<readonly [name: string, load: () => Promise<Register>]> = [
  ['encode', async () => (await import('./commands/encode.js')).registerEncode],
  ['score', async () => (await import('./commands/score.js')).registerScore],
  ['extract', async () => (await import('./commands/extract.js')).registerExtract],
  ['tokenize', async () => (await import('./commands/tokenize.js')).registerTokenize],
  ['models', async () => (await import('./commands/models.js')).registerModels],
  ['worker', async () => (await import('./commands/worker.js')).registerWorker],
  ['submit', async () => (await import('./commands/submit.js')).registerSubmit],
  ['sink', async () => (await import('./commands/sink.js')).registerSink],
  ['gateway', async () => (await import('./commands/gateway.js')).registerGateway],
  ['dev', async () => (await import('./commands/dev.js')).registerDev],
  ['ingest', async () => (await import('./commands/ingest.js')).registerIngest],
  ['runs', async () => (await import('./commands/runs.js')).registerRuns],
  ['search', async () => (await import('./commands/search.js')).registerSearch],
  ['index', async () => (await import('./commands/index-admin.js')).registerIndexAdmin],
  ['pipelines', async () => (await import('./commands/pipelines.js')).registerPipelines],
  ['classify', async () => (await import('./commands/classify.js')).registerClassify],
];

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

/**
 * The command word of a command line (the arguments after `node shoal`): its first word that is
 * neither an option nor the value of a global option that takes one (`--catalog encode.yaml`).
 */
export function commandWord(program: Command, args: readonly string[]): string | null {
  const takesValue = new Set(
    program.options.filter((option) => option.required || option.optional).flatMap((option) => [option.long, option.short].filter((flag) => flag !== undefined)),
  );
  for (let index = 0; index < args.length; index++) {
    const arg = args[index] ?? '';
    if (arg === '--') return null;
    if (!arg.startsWith('-')) return arg;
    if (takesValue.has(arg)) index++;
  }
  return null;
}

/**
 * The program for `args` (the arguments after `node shoal`; every command when left out): the
 * named command's file only, none for a bare `--version`, all of them otherwise.
 */
export async function buildProgram(app: CliApp, args?: readonly string[]): Promise<Command> {
  const program = rootCommand(app);
  const word = args === undefined ? null : commandWord(program, args);
  const named = COMMANDS.find(([name]) => name === word);
  const versionOnly = args !== undefined && word === null && (args.includes('-V') || args.includes('--version'));
  const chosen = named !== undefined ? [named] : versionOnly ? [] : COMMANDS;
  const registers = await Promise.all(chosen.map(([, load]) => load()));
  for (const register of registers) register(program, app);
  return program;
}

function rootCommand(app: CliApp): Command {
  const program = new Command('shoal');
  program
    .description('Run embedding, reranking and extraction models (ONNX, Hugging Face layout) over JSON Lines.')
    .version(shoalVersion(), '-V, --version', 'print the version')
    .helpOption('-h, --help', 'show help')
    .exitOverride()
    .configureOutput({
      writeOut: (text) => app.io.stdout.write(text),
      writeErr: (text) => app.io.stderr.write(text),
      // main.ts prints commander's errors in Shoal's own `error [CODE]: message` format.
      outputError: () => undefined,
    })
    .showSuggestionAfterError(true)
    .option('--config <file>', 'settings file (YAML/JSON): keys as in the settings table of docs/configuration.md, e.g. memoryBudget: 4GiB (env SHOAL_CONFIG; variables and flags win over it)')
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
  return program;
}
