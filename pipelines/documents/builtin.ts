import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { ErrorCode, isShoalError, ShoalError } from '../../adapters/protocol/errors.js';
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

/** A built-in name (or a name in `folder`, SHOAL_PIPELINES) or a path to a YAML/JSON file. */
export async function resolvePipeline(nameOrFile: string | undefined, folder: string | null = null): Promise<PipelineDefinition> {
  const key = nameOrFile ?? 'documents';
  // A bare name is looked up as a document job names it: the SHOAL_PIPELINES folder first, then built-in.
  if (folder !== null && nameOrFile !== undefined && !/[./\\]/.test(key)) {
    // A name given on a command line that names nothing is a bad setting (exit 2), as without the folder.
    return pipelineByName(key, folder).catch((error: unknown) => {
      if (isShoalError(error) && error.code === ErrorCode.NOT_FOUND) throw new ShoalError(ErrorCode.CONFIG_INVALID, `${error.message}; or give a .yaml/.json file`, { cause: error });
      throw error;
    });
  }
  const builtin = BUILTINS.get(key);
  if (builtin !== undefined) return builtin();
  if (!/[./\\]/.test(key)) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `no built-in pipeline ${JSON.stringify(key)} (built-in: ${builtinPipelineNames().join(', ')}; or give a .yaml/.json file)`);
  }
  return loadDefinitionFile(key);
}

/** Pipeline names a message may carry: nothing that walks a file system. */
const PIPELINE_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const PIPELINE_EXTENSIONS = ['.yaml', '.yml', '.json'] as const;

/**
 * A pipeline by **name**, as a document job names it: a built-in one, or `NAME.yaml|.yml|.json`
 * in `folder` (SHOAL_PIPELINES). A name is never a path, so a job cannot make a worker read a file
 * outside that folder. NOT_FOUND names what is there.
 */
export async function pipelineByName(name: string, folder: string | null): Promise<PipelineDefinition> {
  if (!PIPELINE_NAME.test(name)) throw new ShoalError(ErrorCode.INVALID_INPUT, `pipeline name ${JSON.stringify(name.slice(0, 80))} must be 1-64 characters of A-Z a-z 0-9 _ -`);
  if (folder !== null) {
    for (const extension of PIPELINE_EXTENSIONS) {
      const path = join(folder, `${name}${extension}`);
      const exists = await stat(path).then((found) => found.isFile(), () => false);
      if (exists) return loadDefinitionFile(path);
    }
  }
  const builtin = BUILTINS.get(name);
  if (builtin !== undefined) return builtin();
  throw new ShoalError(ErrorCode.NOT_FOUND, `no pipeline named ${JSON.stringify(name)} (built-in: ${builtinPipelineNames().join(', ')}${folder === null ? '; set SHOAL_PIPELINES to a folder of NAME.yaml files' : `; none of ${PIPELINE_EXTENSIONS.map((extension) => name + extension).join(', ')} in ${folder}`})`);
}
