import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CONFORMANCE_DIR, missingReason } from './shared.js';

/**
 * The conformance kit (../shared/conformance): random-weight models in Hugging Face layouts with
 * reference outputs. `conformanceSuite` registers a suite per model folder, or one skipped test
 * naming the reason when the kit is absent.
 */

const Case = z.looseObject({
  id: z.string(),
  description: z.string().optional(),
  inputs: z.looseObject({}),
  tokenization: z.looseObject({ max_length: z.number().optional() }).optional(),
  encodings: z.array(z.looseObject({ input_ids: z.array(z.number()).optional() })).optional(),
  model_inputs: z.record(z.string(), z.unknown()).optional(),
  raw_outputs: z.record(z.string(), z.unknown()).optional(),
  expected: z.unknown().optional(),
});
export type ConformanceCase = z.infer<typeof Case>;

const CasesFile = z.looseObject({
  model: z.string(),
  task: z.string(),
  conventions: z.record(z.string(), z.unknown()),
  tolerance: z.looseObject({ atol: z.number() }),
  cases: z.array(Case),
});
export type CasesFile = z.infer<typeof CasesFile>;

export interface ConformanceModel {
  name: string;
  dir: string;
  cases: CasesFile;
  atol: number;
}

export function conformanceDir(name: string): string {
  return join(CONFORMANCE_DIR, name);
}

export function loadConformance(name: string): ConformanceModel | null {
  const dir = conformanceDir(name);
  const file = join(dir, 'cases.json');
  if (!existsSync(file)) return null;
  const cases = CasesFile.parse(JSON.parse(readFileSync(file, 'utf8')));
  return { name, dir, cases, atol: cases.tolerance.atol };
}

/** describe() for one kit model; the body receives the parsed model. Skips with a reason when absent. */
export function conformanceSuite(name: string, body: (model: ConformanceModel) => void): void {
  const model = loadConformance(name);
  if (model === null) {
    describe(`conformance ${name}`, () => {
      it.skip(missingReason(conformanceDir(name)), () => undefined);
    });
    return;
  }
  describe(`conformance ${name}`, () => body(model));
}

/** Asserts |a - e| <= atol element-wise, reporting the worst index. */
export function expectAllClose(actual: readonly number[], expected: readonly number[], atol: number, label = ''): void {
  expect(actual.length, `${label} length`).toBe(expected.length);
  let worst = 0;
  let worstAt = -1;
  for (let i = 0; i < expected.length; i++) {
    const d = Math.abs((actual[i] ?? Number.NaN) - (expected[i] ?? Number.NaN));
    if (!(d <= worst)) {
      worst = d;
      worstAt = i;
    }
  }
  expect(worst, `${label} worst |diff| at index ${worstAt}`).toBeLessThanOrEqual(atol);
}

export function numberMatrix(value: unknown, label: string): number[][] {
  return z.array(z.array(z.number()), { error: `${label} is not a number[][]` }).parse(value);
}
