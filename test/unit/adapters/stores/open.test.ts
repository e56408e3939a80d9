import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { openIndexUri, redactUri } from '../../../../adapters/stores/open.js';

/** `--index URI` forms: which backend each opens, and the errors for the ones it refuses (no connection is made here). */

describe('openStore', () => {
  it('opens each backend by its URI form, the URI table winning over --table', () => {
    expect(openIndexUri('./shoal-index')).toMatchObject({ backend: 'lancedb', table: 'chunks' });
    expect(openIndexUri('lancedb:///tmp/x?table=t1', { table: 'other' })).toMatchObject({ backend: 'lancedb', table: 't1' });
    expect(openIndexUri('postgres://u:pw@db.example:5433/shoal?table=docs&sslmode=require')).toMatchObject({ backend: 'pgvector', table: 'docs', display: 'postgres://u:***@db.example:5433/shoal?table=docs&sslmode=require' });
    expect(openIndexUri('postgresql://u@localhost/shoal', { table: 'mine' })).toMatchObject({ backend: 'pgvector', table: 'mine' });
    expect(openIndexUri('postgres://u@localhost/shoal?table=docs&ef_search=400')).toMatchObject({ backend: 'pgvector', table: 'docs' });
    expect(openIndexUri('chroma://localhost:8000/notes')).toMatchObject({ backend: 'chroma', table: 'notes' });
    expect(openIndexUri('qdrant://localhost:6333/notes?ssl=true', { credentials: { qdrantApiKey: 'k' } })).toMatchObject({ backend: 'qdrant', table: 'notes' });
    expect(openIndexUri('file:///tmp/rows?table=t')).toMatchObject({ backend: 'file', table: 't' });
    expect(openIndexUri('s3://bucket/prefix', { table: 'docs' })).toMatchObject({ backend: 's3', table: 'docs' });
    expect(openIndexUri('s3://bucket/prefix?table=t2', { table: 'docs' })).toMatchObject({ backend: 's3', table: 't2' });
  });

  it('refuses what it cannot open, naming the accepted forms and never the password', () => {
    const refused = (uri: string, options = {}): unknown => {
      try {
        openIndexUri(uri, options);
      } catch (error) {
        return error;
      }
      throw new Error(`${uri} was accepted`);
    };
    expect(refused('mongodb://u:secret@h/db')).toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('postgres://user@host:port/db') });
    expect(String((refused('mongodb://u:secret@h/db') as Error).message)).not.toContain('secret');
    expect(refused('postgres://u:secret@h:5432/db?tabel=x')).toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('unknown parameter "tabel"') });
    expect(refused('postgres://h:5432/db')).toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('user') });
    expect(refused('postgres://u@h/db?sslmode=prefer')).toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('sslmode') });
    expect(refused('postgres://u@h/db?table=a;drop')).toMatchObject({ code: ErrorCode.INVALID_INPUT });
    for (const ef of ['0', '1001', 'many', '2.5']) expect(refused(`postgres://u@h/db?ef_search=${ef}`), ef).toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('ef_search') });
    for (const m of ['1', '101', 'x']) expect(refused(`postgres://u@h/db?hnsw_m=${m}`), m).toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('hnsw_m') });
    expect(refused('postgres://u@h/db?hnsw_ef_construction=1001')).toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('hnsw_ef_construction') });
    // pgvector's own rule (ef_construction ≥ 2 × m), refused when the URI is read, not when the index is built at the end of a run.
    expect(refused('postgres://u:secret@h/db?hnsw_m=48')).toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('hnsw_ef_construction: must be at least twice hnsw_m') });
    expect(refused('postgres://u@h/db?hnsw_m=24&hnsw_ef_construction=40')).toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('hnsw_ef_construction') });
    expect(String((refused('postgres://u:secret@h/db?hnsw_m=48') as Error).message)).not.toContain('secret');
    expect(openIndexUri('postgres://u@h/db?hnsw_m=24&hnsw_ef_construction=200')).toMatchObject({ backend: 'pgvector' });
    expect(refused('chroma://key:secret@h:8000/c')).toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('CHROMA_API_KEY') });
    expect(refused('file://host/dir')).toMatchObject({ code: ErrorCode.INVALID_INPUT });
    expect(refused('s3://bucket/prefix?tabel=x')).toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('unknown parameter "tabel"') });
    expect(refused('s3://Bad_Bucket/prefix')).toMatchObject({ code: ErrorCode.INVALID_INPUT });
    expect(refused('postgres://u@h/db?sslmode=verify-full', { credentials: { pgSslRootCert: '/nonexistent/ca.pem' } })).toMatchObject({ code: ErrorCode.CONFIG_INVALID });
  });

  it('redacts passwords only', () => {
    expect(redactUri('postgres://user:p%40ss@h:1/db')).toBe('postgres://user:***@h:1/db');
    expect(redactUri('postgres://user@h/db')).toBe('postgres://user@h/db');
    expect(redactUri('/plain/dir')).toBe('/plain/dir');
  });

  // A generated password often holds '/', '?', '#' or '@' that the user did not percent-encode:
  // new URL() then fails (or reads part of the password as the host), and the message or summary
  // quoting the URI must still not carry any of it.
  it('never prints any part of a password the user did not percent-encode', () => {
    for (const password of ['pa/ss', 'pa?ss', 'pa#ss', 'p@ss', 'a@b/c?d#e']) {
      const uri = `postgres://user:${password}@db.example:5432/shoal`;
      expect(redactUri(uri), uri).toBe('postgres://user:***@db.example:5432/shoal');
      let message = '';
      try {
        message = openIndexUri(uri).display;
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message, uri).not.toContain(password.slice(-2));
      expect(message, uri).not.toContain(password.slice(0, 2));
    }
  });

  // `T__documents`, `T__spec` (and pgvector's index names `T__source`, `T__hnsw`, `T__text`) are table T's
  // own relations: a table of that name was written into T's state table (an INTERNAL schema error
  // on LanceDB and pgvector, and `--prune` of T deleting its rows by source).
  it('refuses table names that end like the tables another table keeps beside it', () => {
    const uris = (table: string): string[] => [
      `/tmp/shoal-x?${table}`.replace(/\?.*/, ''), `lancedb:///tmp/x?table=${table}`, `postgres://u@h/db?table=${table}`, `chroma://h:8000/${table}`,
      `qdrant://h:6333/${table}`, `file:///tmp/x?table=${table}`, `s3://bucket/prefix?table=${table}`,
    ];
    for (const suffix of ['__documents', '__spec', '__source', '__hnsw', '__text']) {
      for (const uri of uris(`notes${suffix}`)) {
        let error: unknown = null;
        try {
          openIndexUri(uri, { table: `notes${suffix}` });
        } catch (caught) {
          error = caught;
        }
        expect(error, uri).toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining(suffix) });
      }
    }
    expect(openIndexUri('postgres://u@h/db?table=my__notes')).toMatchObject({ table: 'my__notes' });
  });
});
