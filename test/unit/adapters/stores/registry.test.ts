import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { renderStoresTable, withStoresTable } from '../../../../adapters/stores/registry-table.js';
import { INDEX_FORMS, parseIndexRef, STORE_SETTINGS, STORES, storeFor } from '../../../../adapters/stores/registry.js';
import { SETTINGS } from '../../../../services/settings/table.js';

/** The stores registry: one entry per backend folder, from which parsing, help, settings and docs come. */

describe('stores registry', () => {
  it('gives every scheme to one backend, and bare folders to LanceDB alone', () => {
    const schemes = STORES.flatMap((store) => store.schemes);
    expect(new Set(schemes).size).toBe(schemes.length);
    expect(STORES.filter((store) => 'bareFolder' in store).map((store) => store.name)).toEqual(['lancedb']);
    expect(storeFor('/data/index').name).toBe('lancedb');
    expect(storeFor('POSTGRESQL://u@h/db').name).toBe('pgvector');
    expect(() => storeFor('mysql://h/db')).toThrow(/unknown scheme "mysql:\/\/"/);
  });

  it('parses each backend\'s URI once into an IndexRef naming its backend, table and local folder, connecting to nothing', () => {
    const cases: [string, string, string, boolean][] = [
      ['./idx', 'lancedb', 'chunks', true],
      ['lancedb:///tmp/x?table=t1', 'lancedb', 't1', true],
      ['postgres://me:secret@db:5432/app?table=t2', 'pgvector', 't2', false],
      ['chroma://h:8000/c3', 'chroma', 'c3', false],
      ['qdrant://h/c4', 'qdrant', 'c4', false],
      ['file:///tmp/y?table=t5', 'file', 't5', true],
      ['s3://bucket/prefix?table=t6', 's3', 't6', false],
    ];
    for (const [uri, backend, table, local] of cases) {
      const ref = parseIndexRef(uri);
      expect([ref.backend, ref.table, ref.localDir !== null], uri).toEqual([backend, table, local]);
    }
    // The password never reaches the printable form.
    expect(parseIndexRef('postgres://me:secret@db:5432/app').display).toBe('postgres://me:***@db:5432/app');
    expect(STORES.map((store) => store.name).sort()).toEqual(['chroma', 'file', 'lancedb', 'pgvector', 'qdrant', 's3']);
  });

  it('refuses a bad URI as INVALID_INPUT with details.field "index", listing every accepted form', () => {
    for (const uri of ['', 'chroma://user:key@h/c', 'postgres://h/db?tabel=x', 'file://host/dir']) {
      let caught: unknown;
      try {
        parseIndexRef(uri);
      } catch (error) {
        caught = error;
      }
      expect(caught, uri).toMatchObject({ code: ErrorCode.INVALID_INPUT, details: { field: 'index' } });
      expect(String((caught as Error).message)).toContain('file:///dir or s3://bucket/prefix');
    }
    expect(INDEX_FORMS.split(', ')).toHaveLength(STORES.reduce((count, store) => count + store.forms.length, 0));
  });

  it('gives the settings table each backend\'s variables, declared once by the backend', () => {
    for (const [key, spec] of Object.entries(STORE_SETTINGS)) {
      expect(SETTINGS[key as keyof typeof SETTINGS].env, key).toEqual(spec.env);
    }
    expect(Object.keys(STORE_SETTINGS).sort()).toEqual(['chromaApiKey', 'chromaDatabase', 'chromaTenant', 'pgPassword', 'pgSslMode', 'pgSslRootCert', 'qdrantApiKey', 'storeTimeoutMs']);
  });

  it('keeps the backends table of docs/storage.md current (npx tsx scripts/stores-table.ts --write)', () => {
    const page = readFileSync(new URL('../../../../docs/storage.md', import.meta.url), 'utf8');
    expect(withStoresTable(page)).toBe(page);
    expect(page).toContain(renderStoresTable());
  });
});
