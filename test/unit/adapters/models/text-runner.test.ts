import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode, ShoalError } from '../../../../adapters/protocol/errors.js';
import { createSession, type CreatedSession } from '../../../../adapters/runtime/ort-session.js';
import { resolveRuntimeOptions } from '../../../../adapters/runtime/runtime-options.js';
import { describeModel } from '../../../../adapters/models/detect.js';
import type { RunnerContext } from '../../../../adapters/models/family.js';
import { chooseOutput, openRunner } from '../../../../adapters/models/text/text-runner.js';
import { parseCatalog } from '../../../../pipelines/inference/catalog.js';
import { InferenceEngine } from '../../../../pipelines/inference/engine.js';
import { fixtureDir } from '../../../helpers/tiny-model.js';

/**
 * The text-runner skeleton's shared steps: which graph output a family reads (catalog
 * `options.output` first, then the family's preferred names, then a lone output), the error that
 * names the graph's outputs when none fits, and a session released when the runner refuses it.
 */

const MEAN = fixtureDir('tiny-bert-mean');
const SPLADE = fixtureDir('tiny-splade');
const CROSS = fixtureDir('tiny-cross-encoder');

describe('chooseOutput', () => {
  const profile = { id: 'm' };
  it('prefers the configured output, then the preferred names in order, then a lone output', () => {
    expect(chooseOutput(profile, ['a', 'b'], { holds: 'x', preferred: ['b', 'a'], configured: 'a' })).toBe('a');
    expect(chooseOutput(profile, ['a', 'b'], { holds: 'x', preferred: ['c', 'b', 'a'] })).toBe('b');
    expect(chooseOutput(profile, ['only'], { holds: 'x', preferred: ['c'] })).toBe('only');
  });

  it('names the outputs when none fits; the catalog hint only for families with options.output', () => {
    expect(() => chooseOutput(profile, ['a', 'b'], { holds: 'embeddings', preferred: ['c'], configured: undefined })).toThrow(
      'm: cannot tell which ONNX output holds embeddings (outputs: a, b); set options.output in the catalog',
    );
    expect(() => chooseOutput(profile, ['a'], { holds: 'span logits', preferred: ['c'], configured: 'z' })).toThrow('(outputs: a); set options.output');
    let thrown: unknown;
    try {
      chooseOutput(profile, ['a', 'b'], { holds: 'the token logits', preferred: ['c'] });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ShoalError);
    expect(thrown).toMatchObject({ code: ErrorCode.MODEL_LOAD_FAILED, message: 'm: cannot tell which ONNX output holds the token logits (outputs: a, b)' });
  });
});

describe('openRunner', () => {
  it('releases the session when the runner refuses the graph, and passes the error on', async () => {
    const runtime = resolveRuntimeOptions({});
    let released = 0;
    let opened: CreatedSession | undefined;
    const { profile } = await describeModel('tiny-bert-mean', MEAN);
    const context: RunnerContext = {
      profile,
      runtime,
      async openSession(): Promise<CreatedSession> {
        opened = await createSession(`${MEAN}/onnx/model.onnx`, runtime);
        const release = opened.session.release.bind(opened.session);
        opened.session.release = async () => {
          released += 1;
          await release();
        };
        return opened;
      },
    };
    const refusal = new ShoalError(ErrorCode.MODEL_LOAD_FAILED, 'refused');
    await expect(
      openRunner(context, () => {
        throw refusal;
      }),
    ).rejects.toBe(refusal);
    expect(opened?.session.outputNames).toEqual(['last_hidden_state']);
    expect(released).toBe(1);
  });
});

describe('output choice through the engine', () => {
  let engine: InferenceEngine;
  beforeAll(() => {
    const catalog = parseCatalog(
      {
        models: {
          'mean-named': { source: MEAN, options: { output: 'last_hidden_state' } },
          'mean-missing': { source: MEAN, options: { output: 'sentence_embedding' } },
          'splade-missing': { source: SPLADE, options: { output: 'nope' } },
          'cross-missing': { source: CROSS, options: { output: 'nope' } },
        },
      },
      'text-runner test',
    );
    engine = new InferenceEngine({ catalog });
  });
  afterAll(async () => {
    await engine.close();
  });

  it('a configured output that exists gives the same vectors as the default choice', async () => {
    const [byDefault, named] = await Promise.all([
      engine.encode({ model: MEAN, items: ['a short text', 'another one'] }),
      engine.encode({ model: 'mean-named', items: ['a short text', 'another one'] }),
    ]);
    expect(named.items.map((i) => i.dense)).toEqual(byDefault.items.map((i) => i.dense));
    expect(byDefault.items[0]?.dense?.length).toBeGreaterThan(0);
  });

  for (const [model, holds, call] of [
    ['mean-missing', 'embeddings', 'encode'],
    ['splade-missing', 'the MLM logits', 'encode'],
    ['cross-missing', 'the logits', 'score'],
  ] as const) {
    it(`${model}: MODEL_LOAD_FAILED naming what the output holds and the graph's outputs`, async () => {
      const request = call === 'encode' ? engine.encode({ model, items: ['text'] }) : engine.score({ model, query: 'q', items: ['d'] });
      await expect(request).rejects.toMatchObject({ code: ErrorCode.MODEL_LOAD_FAILED });
      await expect(request).rejects.toThrow(new RegExp(`cannot tell which ONNX output holds ${holds} \\(outputs: [a-z_, ]+\\); set options.output in the catalog`));
    });
  }
});
