import { ErrorCode, ShoalError } from './errors.js';

/**
 * Model names that arrive over the network (HTTP, NATS, `shoal submit`) name a model some worker
 * serves: a catalog or hub id (`BAAI/bge-small-en-v1.5`) or a folder name under a models
 * directory. They are never paths: a `..` segment, an absolute or home path, a backslash or a
 * control character is refused as INVALID_INPUT before it reaches a worker, a subject or a log.
 */

const CONTROL = /[\u0000-\u001f\u007f]/;

export function checkRemoteModelName(model: string): string {
  const problem =
    CONTROL.test(model)
      ? 'contains control characters'
      : model.includes('\\')
        ? 'contains a backslash'
        : /^[a-z][a-z0-9+.-]*:\/\//i.test(model) || /^(file|data|https?):/i.test(model)
          ? 'is a URL, not a model name'
          : model.startsWith('/') || model.startsWith('~')
            ? 'is a path, not a model name'
            : model.split('/').some((segment) => segment === '..' || segment === '.' || segment === '')
              ? 'has an empty, "." or ".." segment'
              : null;
  if (problem === null) return model;
  throw new ShoalError(ErrorCode.INVALID_INPUT, `model "${JSON.stringify(model).slice(1, 81).replace(/"$/, '')}" ${problem}: name a model the workers serve (GET /v1/models)`, {
    details: { field: 'model' },
  });
}
