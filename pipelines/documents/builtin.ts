import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { loadDefinitionFile, parseDefinition, type PipelineDefinition } from './definition.js';

/**
 * Built-in pipelines, usable by name with no file. `documents` is what `shoal ingest` runs by
 * default: parse with OCR where needed, 200-token chunks, MiniLM embeddings, a LanceDB index.
 */

const BUILTINS: ReadonlyMap<string, () => PipelineDefinition> = new Map([
  [
    'documents',
    () =>
      parseDefinition(
        {
          name: 'documents',
          description: 'PDF, text, Markdown, HTML and images → token-aware chunks → dense vectors → LanceDB',
          stages: {},
        },
        'documents (built-in)',
      ),
  ],
]);

export function builtinPipelineNames(): string[] {
  return [...BUILTINS.keys()];
}

/** A built-in name or a path to a YAML/JSON file. */
export async function resolvePipeline(nameOrFile: string | undefined): Promise<PipelineDefinition> {
  const key = nameOrFile ?? 'documents';
  const builtin = BUILTINS.get(key);
  if (builtin !== undefined) return builtin();
  if (!/[./\\]/.test(key)) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `no built-in pipeline ${JSON.stringify(key)} (built-in: ${builtinPipelineNames().join(', ')}; or give a .yaml/.json file)`);
  }
  return loadDefinitionFile(key);
}
