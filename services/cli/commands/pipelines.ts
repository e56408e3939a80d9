import type { Command } from 'commander';
import { builtinPipelineNames, resolvePipeline } from '../../../pipelines/documents/builtin.js';
import { settingsHash } from '../../../pipelines/documents/identity.js';
import type { CliApp } from '../app.js';

/** `shoal pipelines show [NAME|FILE]` and `shoal pipelines list`: document pipeline definitions. */

const EXAMPLE = `
Examples:
  $ shoal pipelines show                 (the built-in documents pipeline, defaults filled in)
  $ shoal pipelines show my-pipeline.yaml
  $ shoal pipelines list`;

export function registerPipelines(program: Command, app: CliApp): void {
  const pipelines = program.command('pipelines').summary('show document pipelines').description('Commands about document pipelines (shoal ingest).');
  pipelines
    .command('show')
    .summary('print a resolved pipeline definition as JSON')
    .description('Validate a pipeline (built-in name or YAML/JSON file) and print it with every default filled in.')
    .argument('[pipeline]', 'built-in name, a name in the SHOAL_PIPELINES folder, or a file (default: documents)')
    .addHelpText('after', EXAMPLE)
    .action(async (nameOrFile: string | undefined) => {
      const definition = await resolvePipeline(nameOrFile, app.settings.value('pipelinesDir') ?? null);
      app.io.stdout.write(`${JSON.stringify({ ...definition, settingsHash: settingsHash(definition) }, null, 2)}\n`);
    });
  pipelines
    .command('list')
    .summary('list the built-in pipelines')
    .action(() => {
      for (const name of builtinPipelineNames()) app.io.stdout.write(`${name}\n`);
    });
}
