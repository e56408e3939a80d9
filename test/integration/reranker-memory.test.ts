import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { conformanceDir } from '../helpers/conformance.js';
import { REPO_ROOT, missingReason, sharedAvailable } from '../helpers/shared.js';

/**
 * A causal-LM reranker never materialises full-vocabulary logits: the graph is rewritten at load
 * to return the last token's no/yes logits, so scoring documents of 2,000 tokens with the kit's
 * Qwen3-Reranker layout (151,936-token vocabulary) keeps the whole process under 1 GB. The
 * exported graph run as is (options.rewrite: false) returns [batch, sequence, 151,936] floats,
 * 1.2 GB for one such pair: 16 pairs peaked at 4.2 GB that way (and took 4 minutes on 2 cores),
 * so only the rewritten graph is run here, on the 64 pairs (peak 659 MiB on 2026-11-29,
 * about 12 CPU-seconds).
 */

const model = conformanceDir('qwen3-reranker');
const Report = z.strictObject({ before: z.number(), after: z.number(), items: z.number(), tokens: z.number(), min: z.number(), max: z.number() });
const GB = 1024 ** 3;

describe('causal-LM reranker memory', () => {
  if (!sharedAvailable(model)) {
    it.skip(missingReason(model), () => undefined);
    return;
  }
  it('scores 64 pairs of 2,000-token documents with a peak RSS under 1 GB', () => {
    const child = spawnSync(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'test', 'integration', 'scripts', 'reranker-peak-memory.ts'), model, 'true', '64', '2000'], {
      encoding: 'utf8',
      timeout: 240_000,
    });
    expect(child.status, child.stderr).toBe(0);
    const report = Report.parse(JSON.parse(child.stdout.trim().split('\n').at(-1) ?? ''));
    console.info(`reranker peak RSS: ${(report.before / 2 ** 20).toFixed(0)} MiB before scoring, ${(report.after / 2 ** 20).toFixed(0)} MiB after (${report.tokens} tokens)`);
    expect(report.items).toBe(64);
    // Each pair is its document (about 2,000 tokens) inside the ~85-token prompt.
    expect(report.tokens).toBeGreaterThan(64 * 2000);
    expect(report.min).toBeGreaterThan(0);
    expect(report.max).toBeLessThan(1);
    expect(report.after).toBeLessThan(GB);
  });
});
