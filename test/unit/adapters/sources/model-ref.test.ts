import { homedir } from 'node:os';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ErrorCode, ShoalError } from '../../../../adapters/protocol/errors.js';
import { cacheFolderName, parseModelRef } from '../../../../adapters/sources/model-ref.js';

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (error instanceof ShoalError) return error.code;
    return `not a ShoalError: ${String(error)}`;
  }
  return 'no error';
}

describe('parseModelRef: hub ids', () => {
  it.each([
    ['org/name', 'org/name', null],
    ['sentence-transformers/all-MiniLM-L6-v2', 'sentence-transformers/all-MiniLM-L6-v2', null],
    ['BAAI/bge-small-en-v1.5', 'BAAI/bge-small-en-v1.5', null],
    ['Xenova/all_MiniLM.L6', 'Xenova/all_MiniLM.L6', null],
    ['bert-base-uncased', 'bert-base-uncased', null],
    ['org/name@main', 'org/name', 'main'],
    ['org/name@v1.0', 'org/name', 'v1.0'],
    ['org/name@refs/pr/1', 'org/name', 'refs/pr/1'],
    ['org/name@0123456789abcdef0123456789abcdef01234567', 'org/name', '0123456789abcdef0123456789abcdef01234567'],
    ['  org/name  ', 'org/name', null],
  ])('%s → repo %s, revision %s', (raw, repo, revision) => {
    expect(parseModelRef(raw)).toEqual({ kind: 'hub', repo, revision, raw });
  });

  it.each([
    ['org/..'],
    ['org/../../etc'],
    ['org/a..b'],
    ['..org/name'],
    ['org/name/extra'],
    ['org//name'],
    ['org/'],
    ['org/name/'],
    ['.hidden/name'],
    ['-org/name'],
    ['org/na me'],
    ['org\\name'],
    ['org/name%2F..'],
    ['org/name\0'],
    ['~user/name'],
    ['org/name@'],
    ['org/name@../main'],
    ['org/name@refs/../../x'],
    ['org/name@refs//pr'],
    ['org/name@/main'],
    ['org/name@main/'],
    ['org/name@a@b'],
    ['org/name@ma in'],
    [`org/${'x'.repeat(97)}`],
    [`org/name@${'a'.repeat(129)}`],
    [''],
    ['   '],
  ])('%j is rejected with INVALID_INPUT', (raw) => {
    expect(codeOf(() => parseModelRef(raw))).toBe(ErrorCode.INVALID_INPUT);
  });

  it('says how to write a valid id', () => {
    expect(() => parseModelRef('org/a b')).toThrow(/org\/name\[@revision\]/);
    expect(() => parseModelRef('org/name@../x')).toThrow(/invalid revision "\.\.\/x"/);
  });
});

describe('parseModelRef: local folders', () => {
  it.each([
    ['/models/mini', '/models/mini'],
    ['/models/../models/mini/', '/models/mini'],
    ['./models/mini', resolve(process.cwd(), 'models/mini')],
    ['../mini', resolve(process.cwd(), '../mini')],
    ['.', process.cwd()],
    ['~/models/mini', resolve(homedir(), 'models/mini')],
    ['~', homedir()],
    ['file:///models/mini', '/models/mini'],
    ['file:///models/with%20space', '/models/with space'],
  ])('%s → %s', (raw, path) => {
    expect(parseModelRef(raw)).toEqual({ kind: 'path', path, raw });
  });

  it('rejects a file: URL naming another host', () => {
    expect(codeOf(() => parseModelRef('file://otherhost/models/mini'))).toBe(ErrorCode.INVALID_INPUT);
  });
});

describe('cacheFolderName', () => {
  it('follows the hub cache naming', () => {
    expect(cacheFolderName('org/name')).toBe('models--org--name');
    expect(cacheFolderName('bert-base-uncased')).toBe('models--bert-base-uncased');
  });
});
