import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

/** Lints `code` as if it were the file at `path` (relative to the repository; the file need not exist). */
async function problems(path: string, code: string): Promise<string[]> {
  const eslint = new ESLint({ cwd: ROOT });
  const [result] = await eslint.lintText(code, { filePath: `${ROOT}${path}` });
  return (result?.messages ?? []).filter((m) => m.ruleId === 'shoal/layer-imports').map((m) => m.message);
}

describe('lint rule shoal/layer-imports (eslint.config.js)', () => {
  it('refuses an adapter importing a pipeline, statically, as a type, re-exported or lazily', async () => {
    const found = await problems('adapters/nats/example.ts', [
      "import { a } from '../../pipelines/inference/engine.js';",
      "import type { B } from '../../services/gateway/context.js';",
      "export { c } from '../../pipelines/documents/runner.js';",
      "export async function d(): Promise<unknown> { return import('../../services/cli/main.js'); }",
      'void a;',
    ].join('\n'));
    expect(found).toHaveLength(4);
    expect(found[0]).toContain('adapters may not import pipelines');
    expect(found[3]).toContain('adapters may not import services');
  });

  it('refuses one service importing another, except settings and the CLI composing the others', async () => {
    expect(await problems('services/sink/example.ts', "import { x } from '../worker/worker.js';\nvoid x;")).toEqual([
      "services/sink may not import services/worker (services share only services/settings): '../worker/worker.js'",
    ]);
    expect(await problems('services/sink/example.ts', "import { x } from '../settings/environment.js';\nvoid x;")).toEqual([]);
    expect(await problems('services/cli/commands/example.ts', "import { x } from '../../gateway/main.js';\nvoid x;")).toEqual([]);
  });

  it('lets imports flow downwards and within a layer', async () => {
    expect(await problems('services/gateway/example.ts', "import { x } from '../../pipelines/documents/runner.js';\nvoid x;")).toEqual([]);
    expect(await problems('pipelines/documents/example.ts', "import { x } from '../../adapters/protocol/errors.js';\nvoid x;")).toEqual([]);
    expect(await problems('adapters/nats/example.ts', "import { x } from '../protocol/errors.js';\nvoid x;")).toEqual([]);
  });
});
