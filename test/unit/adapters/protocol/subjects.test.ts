import { describe, expect, it } from 'vitest';
import { modelFromToken, modelToken, natsNames } from '../../../../adapters/protocol/subjects.js';

describe('NATS names', () => {
  it('escapes model ids into valid subject tokens and back', () => {
    for (const model of ['BAAI/bge-small-en-v1.5', 'org/name@main', 'bert-mean-embed', '/models/x y', 'ünï/côdé', 'a_b.c*d>e']) {
      const token = modelToken(model);
      expect(token).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(modelFromToken(token)).toBe(model);
    }
    expect(modelToken('BAAI/bge-small-en-v1.5')).toBe('BAAI_2Fbge-small-en-v1_2E5');
    expect(() => modelFromToken('bad.token')).toThrow(/not an escaped model token/);
  });

  it('builds subjects, streams and consumer names under a prefix', () => {
    const names = natsNames('acme.prod');
    expect(names.jobs('encode', 'BAAI/bge-small-en-v1.5')).toBe('acme.prod.jobs.encode.BAAI_2Fbge-small-en-v1_2E5');
    expect(names.consumer('score', 'x/y')).toBe('acme_prod_score_x_2Fy');
    expect(names.jobsStream).toBe('ACME_PROD_JOBS');
    expect(names.results('job-1', 3)).toBe('acme.prod.results.job-1.3');
    expect(() => names.results('bad id', 0)).toThrow(/job id/);
    expect(() => natsNames('bad prefix')).toThrow(/prefix/);
  });
});
