import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../adapters/protocol/errors.js';
import { openSink, redactUri } from '../../../adapters/sinks/open.js';

/** `--index URI` forms: which backend each opens, and the errors for the ones it refuses (no connection is made here). */

describe('openSink', () => {
  it('opens each backend by its URI form, the URI table winning over --table', () => {
    expect(openSink('./shoal-index')).toMatchObject({ backend: 'lancedb', table: 'chunks' });
    expect(openSink('lancedb:///tmp/x?table=t1', { table: 'other' })).toMatchObject({ backend: 'lancedb', table: 't1' });
    expect(openSink('postgres://u:pw@db.example:5433/shoal?table=docs&sslmode=require')).toMatchObject({ backend: 'pgvector', table: 'docs', display: 'postgres://u:***@db.example:5433/shoal?table=docs&sslmode=require' });
    expect(openSink('postgresql://u@localhost/shoal', { table: 'mine' })).toMatchObject({ backend: 'pgvector', table: 'mine' });
    expect(openSink('chroma://localhost:8000/notes')).toMatchObject({ backend: 'chroma', table: 'notes' });
    expect(openSink('qdrant://localhost:6333/notes?ssl=true', { credentials: { qdrantApiKey: 'k' } })).toMatchObject({ backend: 'qdrant', table: 'notes' });
    expect(openSink('file:///tmp/rows?table=t')).toMatchObject({ backend: 'file', table: 't' });
    expect(openSink('s3://bucket/prefix', { table: 'docs' })).toMatchObject({ backend: 's3', table: 'docs' });
    expect(openSink('s3://bucket/prefix?table=t2', { table: 'docs' })).toMatchObject({ backend: 's3', table: 't2' });
  });

  it('refuses what it cannot open, naming the accepted forms and never the password', () => {
    const refused = (uri: string, options = {}): unknown => {
      try {
        openSink(uri, options);
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
});
