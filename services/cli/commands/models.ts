import type { Command } from 'commander';
import { ModelRef } from '../../../adapters/protocol/requests.js';
import { parseWith } from '../../../adapters/protocol/validate.js';
import type { CliApp } from '../app.js';
import { registerModelsCpu } from './models-cpu.js';
import { registerModelsList } from './models-list.js';
import { registerModelsQuantize } from './models-quantize.js';

/**
 * `shoal models inspect M`: what Shoal detected about a model and from which file (family, ONNX
 * graphs, max length, pooling and other family options, prompts, padding, evidence), plus what
 * the loaded runner reports (provider actually used, graph inputs/outputs, output dimension).
 * The session is really created, so a model that inspects cleanly also loads.
 */

const EXAMPLE = `
Examples:
  $ shoal models inspect sentence-transformers/all-MiniLM-L6-v2
  $ shoal models inspect ./models/my-reranker --providers cuda,cpu
  $ shoal --catalog deploy/catalog models inspect minilm | jq .evidence`;

export function registerModels(program: Command, app: CliApp): void {
  const models = program.command('models').summary('list and inspect models').description('Commands about models.');
  models
    .command('inspect')
    .summary('print the detected profile and runner info of a model as JSON')
    .description('Load a model and print, as JSON on stdout, its detected profile and the runner information.')
    .argument('<model>', 'catalog name, hub id (org/name[@revision]) or local folder')
    .addHelpText('after', EXAMPLE)
    .action(async (model: unknown, _options: unknown, self: Command) => {
      const name = parseWith(ModelRef, model, 'model argument');
      const config = app.config(self);
      const progress = app.progress(config);
      try {
        const report = await app.withEngine(config, progress, async (engine) => {
          const { profile, info, loadMs } = await engine.inspect(name);
          const { id, tokenizer, ...rest } = profile;
          return {
            model: id,
            ...rest,
            padding: tokenizer,
            runner: { ...info, loadMs: Math.round(loadMs) },
          };
        });
        progress.stop();
        app.io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      } finally {
        progress.stop();
      }
    });
  registerModelsList(models, app);
  registerModelsQuantize(models, app);
  registerModelsCpu(models, app);
}

