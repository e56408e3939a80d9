import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKED_FORMAT, PACKED_HEADERS } from '../../../../adapters/nats/rpc/packed-vectors.js';
import { REQUEUE_HEADERS } from '../../../../adapters/nats/jobs/requeue.js';
import { RPC_HEADERS } from '../../../../adapters/nats/rpc/rpc-wire.js';
import { ERROR_TRAITS, ErrorCode } from '../../../../adapters/protocol/errors.js';
import { DEAD_LETTER_HEADERS, JobPart, JobPartResult, JobStatus, WorkerInfo } from '../../../../adapters/protocol/jobs.js';
import { EncodeRequest, ExtractRequest, ScoreRequest, TokenizeRequest } from '../../../../adapters/protocol/requests.js';
import { modelToken, natsNames } from '../../../../adapters/protocol/subjects.js';

/**
 * docs/nats.md is what clients in other languages code against: its error-code table, header
 * names and name-derivation examples must be what the code uses.
 */

const DOC = readFileSync(join(import.meta.dirname, '../../../../docs/nats.md'), 'utf8');

/** The code table's rows: `| codes | HTTP | retryable | | codes | HTTP | retryable |`. */
function documentedCodes(): Map<string, { httpStatus: number; retryable: boolean }> {
  const table = DOC.slice(DOC.indexOf('| code | HTTP | retryable |'));
  const rows = table.slice(0, table.indexOf('\n\n')).split('\n').slice(2);
  const out = new Map<string, { httpStatus: number; retryable: boolean }>();
  for (const row of rows) {
    const cells = row.split('|').slice(1, -1).map((cell) => cell.trim());
    for (let i = 0; i + 2 < cells.length; i += 4) {
      const [codes = '', http = '', retryable = ''] = cells.slice(i, i + 3);
      for (const code of codes.match(/`[A-Z_]+`/g) ?? []) out.set(code.slice(1, -1), { httpStatus: Number(http), retryable: retryable === 'yes' });
    }
  }
  return out;
}

describe('docs/nats.md against the wire code', () => {
  it('lists every error code with its HTTP status and retryability', () => {
    const documented = documentedCodes();
    expect([...documented.keys()].sort()).toEqual(Object.values(ErrorCode).sort());
    for (const code of Object.values(ErrorCode)) {
      const actual = ERROR_TRAITS[code];
      expect({ code, ...documented.get(code) }).toEqual({ code, httpStatus: actual.httpStatus, retryable: actual.retryable });
      // Retryable is what decides nak (and the last delivery's dead letter) against term.
      expect(actual.delivery === 'nak').toBe(actual.retryable);
    }
  });

  it('names the headers the code sets and reads', () => {
    const names = [...Object.values(DEAD_LETTER_HEADERS), ...Object.values(RPC_HEADERS), ...Object.values(PACKED_HEADERS), ...Object.values(REQUEUE_HEADERS)];
    for (const name of names) expect(DOC, name).toContain(`\`${name}`);
    expect(DOC).toContain(`\`${PACKED_HEADERS.accept}: ${PACKED_FORMAT}\``);
    expect(DOC).toContain(`\`${PACKED_HEADERS.body}: ${PACKED_FORMAT}\``);
  });

  it('derives names and model tokens as its examples say', () => {
    expect(modelToken('BAAI/bge-small-en-v1.5')).toBe('BAAI_2Fbge-small-en-v1_2E5');
    expect(modelToken('my_model')).toBe('my_5Fmodel');
    expect(DOC).toContain('`BAAI_2Fbge-small-en-v1_2E5`');
    expect(DOC).toContain('`my_model` → `my_5Fmodel`');
    const acme = natsNames('acme.prod');
    expect(acme.jobsStream).toBe('ACME_PROD_JOBS');
    expect(DOC).toContain('`ACME_PROD_JOBS`');
    const names = natsNames();
    expect([names.jobsStream, names.resultsStream, names.deadLetterStream, names.statusBucket, names.payloadBucket, names.workerQueue, names.resultsSink]).toEqual([
      'SHOAL_JOBS',
      'SHOAL_RESULTS',
      'SHOAL_DLQ',
      'shoal_jobs',
      'shoal_payloads',
      'shoal_workers',
      'shoal_results_sink',
    ]);
    expect(names.consumer('encode', 'sentence-transformers/all-MiniLM-L6-v2')).toBe('shoal_encode_sentence-transformers_2Fall-MiniLM-L6-v2');
    expect(DOC).toContain('shoal_encode_sentence-transformers_2Fall-MiniLM-L6-v2');
  });

  it('lists every field of the wire schemas', () => {
    // The documented request of each operation: from "- encode `{" (or "**Tokenize** takes `{") to the closing "}`".
    const request = (start: string): string => {
      const from = DOC.indexOf(start);
      expect(from, start).toBeGreaterThan(-1);
      return DOC.slice(from, DOC.indexOf('}`', from));
    };
    const documented = {
      encode: [EncodeRequest, request('- encode `{')],
      score: [ScoreRequest, request('- score `{')],
      extract: [ExtractRequest, request('- extract `{')],
      tokenize: [TokenizeRequest, request('**Tokenize** takes `{')],
      JobPart: [JobPart, request('**`JobPart`** (')],
      JobPartResult: [JobPartResult, request('**`JobPartResult`** (')],
      JobStatus: [JobStatus, request('**`JobStatus`** (')],
      WorkerInfo: [WorkerInfo, request('**`WorkerInfo`** (')],
    } as const;
    for (const [name, [schema, text]] of Object.entries(documented)) {
      const fields = Object.keys(schema instanceof Object && 'shape' in schema ? schema.shape : {});
      expect(fields.length, name).toBeGreaterThan(0);
      for (const field of fields) expect(text, `${name}.${field}`).toMatch(new RegExp(`\\b${field}\\b`));
    }
  });
});
