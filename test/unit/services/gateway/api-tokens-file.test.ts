import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { resolveGatewayConfig } from '../../../../services/gateway/config.js';

/**
 * `--api-tokens-file` (SHOAL_API_TOKENS_FILE) that holds no token — an empty file, only comments,
 * a secret mounted before it was filled — is refused at start: it used to start the gateway with
 * authentication off (`"auth": false`), silently, on whatever host it was asked to bind.
 */

const dir = mkdtempSync(join(tmpdir(), 'shoal-gw-tokens-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('gateway API tokens file', () => {
  it('refuses a tokens file without tokens (flag or variable) as CONFIG_INVALID naming the file', () => {
    for (const [name, text] of [['empty', ''], ['comments', '# ops team\n\n   \n# nothing yet\n']] as const) {
      const file = join(dir, name);
      writeFileSync(file, text);
      for (const [flags, env] of [
        [{ apiTokensFile: file }, {}],
        [{}, { SHOAL_API_TOKENS_FILE: file }],
      ] as const) {
        expect(() => resolveGatewayConfig(flags, env), name).toThrow(expect.objectContaining({ code: ErrorCode.CONFIG_INVALID, message: expect.stringContaining(`the API tokens file ${file} holds no token`) }));
      }
    }
  });

  it('still reads a file with tokens, and no file still means no authentication', () => {
    const file = join(dir, 'tokens');
    writeFileSync(file, '# ops\nfile-token-0123456789abc\n');
    expect(resolveGatewayConfig({ apiTokensFile: file }, {}).apiTokens).toEqual(['file-token-0123456789abc']);
    expect(resolveGatewayConfig({}, {}).apiTokens).toEqual([]);
  });
});
