// ESLint rule `shoal/layer-imports`: the module map of STYLE.md, checked on every import form —
// `import`, `import type`, `export … from` and lazy `import('…')` with a literal path (a lazy import
// still makes the lower layer depend on the upper one; only its evaluation is deferred).
//  - Layers: services → pipelines → adapters. A file may import its own layer or a lower one.
//  - Services never import each other, except the shared `services/settings` and the CLI, which is
//    the composition root that starts the gateway, the workers and the results sink.
import { dirname, relative, resolve, sep } from 'node:path';

const LAYERS = ['services', 'pipelines', 'adapters'];
const SHARED_SERVICES = new Set(['settings']);
const COMPOSING_SERVICES = new Set(['cli']);

/** `['services', 'cli', …]` for a path under the repository root, or null outside it. */
function segments(root, file) {
  const path = relative(root, file);
  if (path.startsWith('..')) return null;
  return path.split(sep);
}

function violation(root, file, specifier) {
  if (!specifier.startsWith('.')) return null;
  const from = segments(root, file);
  const to = segments(root, resolve(dirname(file), specifier));
  if (from === null || to === null) return null;
  const fromLayer = LAYERS.indexOf(from[0]);
  const toLayer = LAYERS.indexOf(to[0]);
  if (fromLayer < 0 || toLayer < 0) return null;
  if (toLayer < fromLayer) return `${from[0]} may not import ${to[0]} (imports flow ${LAYERS.join(' → ')})`;
  if (fromLayer === 0 && toLayer === 0 && from[1] !== to[1] && !SHARED_SERVICES.has(to[1]) && !COMPOSING_SERVICES.has(from[1])) {
    return `services/${from[1]} may not import services/${to[1]} (services share only services/settings)`;
  }
  return null;
}

/** @type {import('eslint').Rule.RuleModule} */
export const layerImports = {
  meta: {
    type: 'problem',
    docs: { description: 'imports flow services → pipelines → adapters; services do not import each other' },
    schema: [],
  },
  create(context) {
    const root = context.cwd;
    const check = (node, source) => {
      if (source === null || source === undefined || source.type !== 'Literal' || typeof source.value !== 'string') return;
      const reason = violation(root, context.filename, source.value);
      if (reason !== null) context.report({ node, message: `${reason}: '${source.value}'` });
    };
    return {
      ImportDeclaration: (node) => check(node, node.source),
      ExportNamedDeclaration: (node) => check(node, node.source),
      ExportAllDeclaration: (node) => check(node, node.source),
      ImportExpression: (node) => check(node, node.source),
    };
  },
};
