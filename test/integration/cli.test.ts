import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DEFAULT_BATCH_TOKENS } from '../../services/cli/config.js';
import { FakeHub } from '../helpers/fake-hub.js';
import { conformanceDir, expectAllClose, loadConformance, numberMatrix, type ConformanceModel } from '../helpers/conformance.js';
import { missingReason } from '../helpers/shared.js';
import { byId, jsonl, parseJsonl, runShoal, sparseToDense } from '../helpers/shoal-cli.js';

/**
 * The `shoal` executable end to end: real child processes fed JSON Lines built from the
 * conformance kit's case inputs, outputs compared with the kit's expected values (floats within
 * the kit's atol, token ids and entity spans exact), plus the command-line contract (help, exit
 * codes, error format, files, ids, chunking).
 */

const Id = z.union([z.string(), z.number()]);
const DenseLine = z.strictObject({ id: Id, dense: z.array(z.number()), truncated: z.boolean().optional() });
const SparseLine = z.strictObject({
  id: Id,
  sparse: z.strictObject({ indices: z.array(z.number()), values: z.array(z.number()) }),
  truncated: z.boolean().optional(),
});
const MultiLine = z.strictObject({ id: Id, multivector: z.array(z.array(z.number())), truncated: z.boolean().optional() });
const ScoreLine = z.strictObject({
  id: Id,
  scores: z.array(z.strictObject({ index: z.number().int(), score: z.number(), id: Id.optional() })),
});
const EntityOut = z.strictObject({ text: z.string(), label: z.string(), score: z.number(), start: z.number(), end: z.number() });
const ExtractLine = z.strictObject({ id: Id, entities: z.array(EntityOut) });
const TokenizeLine = z.strictObject({
  id: Id,
  ids: z.array(z.number()),
  tokens: z.array(z.string()),
  truncated: z.boolean(),
  length: z.number(),
});

const TextsInput = z.looseObject({ texts: z.array(z.string()) });
const PairsInput = z.looseObject({ pairs: z.array(z.tuple([z.string(), z.string()])) });
const ColbertInput = z.looseObject({ queries: z.array(z.string()), documents: z.array(z.string()) });
const KitEntity = z.looseObject({ entity_group: z.string(), score: z.number(), start: z.number(), end: z.number(), text: z.string() });
const NerExpected = z.array(z.looseObject({ entities_simple: z.array(KitEntity), entities_first: z.array(KitEntity) }));

const scratch = mkdtempSync(join(tmpdir(), 'shoal-cli-test-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** describe() over one kit model, or a skipped test naming why when the kit is absent. */
function kitSuite(name: string, body: (model: ConformanceModel) => void): void {
  const model = loadConformance(name);
  if (model === null) {
    describe(`shoal CLI on ${name}`, () => it.skip(missingReason(conformanceDir(name)), () => undefined));
    return;
  }
  describe(`shoal CLI on ${name}`, () => body(model));
}

/**
 * The kit's offsets are Python string indices (code points); Shoal's are JavaScript string indices
 * (UTF-16 code units, see adapters/protocol/results.ts): they differ after a character outside
 * the BMP, such as an emoji.
 */
function utf16Offset(text: string, codePoints: number): number {
  return [...text].slice(0, codePoints).join('').length;
}

/** Every text of every case as one JSONL line with id `case#index`. */
function textLines(model: ConformanceModel): { id: string; text: string }[] {
  return model.cases.cases.flatMap((kase) => TextsInput.parse(kase.inputs).texts.map((text, i) => ({ id: `${kase.id}#${i}`, text })));
}

function expectOk(run: { code: number | null; stderr: string }): void {
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
}

describe('shoal command line', () => {
  it('--help exits 0 and lists every command', async () => {
    const run = await runShoal(['--help']);
    expect(run.code).toBe(0);
    for (const command of ['encode', 'score', 'extract', 'tokenize', 'models']) expect(run.stdout).toMatch(new RegExp(`^  ${command}\\b`, 'm'));
    expect(run.stdout).toContain('--catalog');
    expect(run.stdout).toContain(`default: ${DEFAULT_BATCH_TOKENS}`);
  });

  it('every command has --help with an example', async () => {
    for (const command of [['encode'], ['score'], ['extract'], ['tokenize'], ['models', 'inspect']]) {
      const run = await runShoal([...command, '--help']);
      expect(run.code, command.join(' ')).toBe(0);
      expect(run.stdout, command.join(' ')).toContain('\nExamples:\n');
      expect(run.stdout, command.join(' ')).toMatch(new RegExp(`\\$ .*shoal ${command.join(' ')} `));
    }
  });

  it('a command line mistake exits 2 with error [CODE]', async () => {
    const missing = await runShoal(['encode']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toBe("error [INVALID_INPUT]: required option '-m, --model <model>' not specified (see --help)\n");
    const badFlag = await runShoal(['tokenize', '--model', 'x', '--threads', 'many']);
    expect(badFlag.code).toBe(2);
    expect(badFlag.stderr).toMatch(/^error \[CONFIG_INVALID\]: invalid configuration: --threads \(or SHOAL_THREADS\): must be a whole number from 1 to \d+\n$/);
  });

  it('encode --output with a file name is refused with a pointer to --out', async () => {
    const run = await runShoal(['encode', '--model', 'x', '--output', 'results.jsonl'], { stdin: jsonl([{ text: 'a' }]) });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('error [INVALID_INPUT]: --output "results.jsonl" is not a list of representations');
    expect(run.stderr).toContain('--out FILE');
  });

  it('an unknown model exits 1 with MODEL_NOT_FOUND', async () => {
    const run = await runShoal(['encode', '--model', 'nobody/no-such-model'], {
      stdin: jsonl([{ id: 'a', text: 'hello' }]),
      env: { SHOAL_OFFLINE: '1', HF_HUB_CACHE: join(scratch, 'empty-hub') },
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^error \[MODEL_NOT_FOUND\]: .*nobody\/no-such-model/);
    expect(run.stdout).toBe('');
  });
});

kitSuite('bert-mean-embed', (model) => {
  it('tokenize: token ids exact, ids preserved, missing ids become line numbers', async () => {
    const kase = model.cases.cases[0];
    const texts = TextsInput.parse(kase?.inputs).texts;
    const stdin = `${JSON.stringify({ id: 'first', text: texts[0] })}\n\n${JSON.stringify({ text: texts[1] })}\n${JSON.stringify({ id: 42, text: texts[0] })}`;
    const run = await runShoal(['tokenize', '--model', model.dir], { stdin });
    expectOk(run);
    const lines = parseJsonl(run.stdout, TokenizeLine);
    expect(lines.map((l) => l.id)).toEqual(['first', 3, 42]);
    const expected = (kase?.encodings ?? []).map((e) => e.input_ids);
    expect(lines.map((l) => l.ids)).toEqual([expected[0], expected[1], expected[0]]);
    expect(lines[0]?.tokens[0]).toBe('[CLS]');
    expect(lines[0]?.length).toBe(expected[0]?.length);
  });

  it('encode: every case embedding within atol', async () => {
    const lines = textLines(model);
    const run = await runShoal(['encode', '--model', model.dir], { stdin: jsonl(lines) });
    expectOk(run);
    const out = parseJsonl(run.stdout, DenseLine);
    expect(out.map((l) => l.id)).toEqual(lines.map((l) => l.id));
    const got = byId(out);
    for (const kase of model.cases.cases) {
      const expected = numberMatrix(z.looseObject({ embeddings: z.unknown() }).parse(kase.expected).embeddings, kase.id);
      expected.forEach((vector, i) => expectAllClose(got.get(`${kase.id}#${i}`)?.dense ?? [], vector, model.atol, `${kase.id}#${i}`));
    }
  });

  it('--input / --out files: results renamed into place, no temporary file left', async () => {
    const dir = mkdtempSync(join(scratch, 'files-'));
    const input = join(dir, 'in.jsonl');
    writeFileSync(input, jsonl([{ id: 'x', text: 'hello world' }, { id: 'y', text: 'hi' }]));
    const output = join(dir, 'out.jsonl');
    const run = await runShoal(['encode', '--model', model.dir, '--output', 'dense', '--input', input, '--out', output]);
    expectOk(run);
    expect(run.stdout).toBe('');
    expect(parseJsonl(readFileSync(output, 'utf8'), DenseLine).map((l) => [l.id, l.dense.length])).toEqual([
      ['x', 32],
      ['y', 32],
    ]);
    expect(readdirSync(dir).sort()).toEqual(['in.jsonl', 'out.jsonl']);
  });

  it('a bad JSON line exits 2 naming the line; earlier lines are written, --output keeps them as .partial', async () => {
    const dir = mkdtempSync(join(scratch, 'bad-'));
    const input = join(dir, 'in.jsonl');
    writeFileSync(input, `${jsonl([{ text: 'a' }, { text: 'b' }, { text: 'c' }, { text: 'd' }])}{"text": "e",\n${jsonl([{ text: 'f' }])}`);
    const output = join(dir, 'tokens.jsonl');
    const run = await runShoal(['tokenize', '--model', model.dir, '--chunk-lines', '2', '--input', input, '--output', output]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(new RegExp(`^error \\[INVALID_INPUT\\]: ${input.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} line 5: not valid JSON`));
    expect(existsSync(output)).toBe(false);
    const partial = parseJsonl(readFileSync(`${output}.partial`, 'utf8'), TokenizeLine);
    expect(partial.map((l) => l.id)).toEqual([1, 2, 3, 4]);
  });

  it('a line that is not an item exits 2 naming the line and the field', async () => {
    const run = await runShoal(['tokenize', '--model', model.dir], { stdin: jsonl([{ id: 1, text: 'ok' }, { id: 2, txt: 'typo' }]) });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^error \[INVALID_INPUT\]: stdin line 2: text: /);
    expect(parseJsonl(run.stdout, TokenizeLine).map((l) => l.id)).toEqual([1]);
  });

  it('--catalog and --model-dir (or SHOAL_CATALOG / SHOAL_MODEL_DIR) resolve a catalog name', async () => {
    const dir = mkdtempSync(join(scratch, 'catalog-'));
    mkdirSync(join(dir, 'models', 'kit'), { recursive: true });
    symlinkSync(model.dir, join(dir, 'models', 'kit', 'bert-mean-embed'));
    const catalog = join(dir, 'catalog.yaml');
    writeFileSync(catalog, 'models:\n  minilm:\n    source: kit/bert-mean-embed\n');
    const stdin = jsonl([{ id: 'a', text: 'hello world' }]);
    const offline = { SHOAL_OFFLINE: '1', HF_HUB_CACHE: join(dir, 'empty-hub') };
    const byFlags = await runShoal(['--catalog', catalog, '--model-dir', join(dir, 'models'), 'tokenize', '--model', 'minilm'], { stdin, env: offline });
    expectOk(byFlags);
    expect(parseJsonl(byFlags.stdout, TokenizeLine).map((l) => l.tokens)).toEqual([['[CLS]', 'hello', 'world', '[SEP]']]);
    const byEnv = await runShoal(['tokenize', '--model', 'minilm'], {
      stdin,
      env: { ...offline, SHOAL_CATALOG: catalog, SHOAL_MODEL_DIR: join(dir, 'models') },
    });
    expectOk(byEnv);
    expect(byEnv.stdout).toBe(byFlags.stdout);
  });

  it('models inspect prints the detected profile and the runner info', async () => {
    const run = await runShoal(['models', 'inspect', model.dir]);
    expectOk(run);
    const report = z
      .looseObject({
        model: z.string(),
        family: z.string(),
        onnx: z.record(z.string(), z.string()),
        maxLength: z.number(),
        options: z.looseObject({ pooling: z.string() }),
        evidence: z.array(z.string()),
        padding: z.looseObject({ paddingSide: z.string(), padId: z.number() }),
        runner: z.looseObject({ provider: z.string(), inputs: z.array(z.string()), outputs: z.array(z.string()), dimension: z.number() }),
      })
      .parse(JSON.parse(run.stdout));
    expect(report).toMatchObject({ model: model.dir, family: 'dense', onnx: { model: 'onnx/model.onnx' }, maxLength: 256 });
    expect(report.options.pooling).toBe('mean');
    expect(report.padding).toMatchObject({ paddingSide: 'right', padId: 0 });
    expect(report.evidence.some((line) => line.includes('sentence_bert_config.json'))).toBe(true);
    expect(report.runner).toMatchObject({ provider: 'cpu', inputs: ['input_ids', 'attention_mask', 'token_type_ids'], outputs: ['last_hidden_state'], dimension: 32 });
  });

  it('a model downloaded from the hub is reported on stderr and encodes like the local folder', async () => {
    const hub = await FakeHub.start({ repos: { 'kit/bert-mean-embed': model.dir } });
    try {
      const kase = model.cases.cases[0];
      const texts = TextsInput.parse(kase?.inputs).texts;
      const expected = numberMatrix(z.looseObject({ embeddings: z.unknown() }).parse(kase?.expected).embeddings, 'embeddings');
      const hubEnv = (cache: string) => ({ HF_ENDPOINT: hub.url, HF_HUB_CACHE: join(scratch, cache), HF_HUB_OFFLINE: '', SHOAL_OFFLINE: '' });
      const stdin = jsonl(texts.map((text, i) => ({ id: i, text })));
      // stderr is not a terminal here: one line per downloaded file.
      const logged = await runShoal(['encode', '--model', 'kit/bert-mean-embed'], { stdin, env: hubEnv('hub-logged') });
      expect(logged.code, logged.stderr).toBe(0);
      expect(logged.stderr).toMatch(/^downloaded kit\/bert-mean-embed\/onnx\/model\.onnx \(\d+\.\d MB\)$/m);
      expect(logged.stderr).toMatch(/^downloaded kit\/bert-mean-embed\/tokenizer\.json /m);
      parseJsonl(logged.stdout, DenseLine).forEach((line, i) => expectAllClose(line.dense, expected[i] ?? [], model.atol, `text ${i}`));
      // --progress forces the bars even off a terminal (log mode); --quiet silences the log lines.
      const bars = await runShoal(['encode', '--model', 'kit/bert-mean-embed', '--progress'], { stdin, env: hubEnv('hub-bars') });
      expect(bars.code, bars.stderr).toBe(0);
      expect(bars.stderr).toMatch(/download kit\/bert-mean-embed\/onnx\/model\.onnx .* 100% \|/);
      const quiet = await runShoal(['encode', '--model', 'kit/bert-mean-embed', '--quiet'], { stdin, env: hubEnv('hub-quiet') });
      expect(quiet.code).toBe(0);
      expect(quiet.stderr).toBe('');
      expect(quiet.stdout).toBe(logged.stdout);
    } finally {
      await hub.close();
    }
  });

  it('many chunks come back complete and in input order', async () => {
    const lines = Array.from({ length: 300 }, (_, i) => (i % 3 === 0 ? { text: 'x '.repeat(i % 17) } : { id: `n${i}`, text: 'x '.repeat(i % 17) }));
    const run = await runShoal(['tokenize', '--model', model.dir, '--chunk-lines', '7'], { stdin: jsonl(lines) });
    expectOk(run);
    const out = parseJsonl(run.stdout, TokenizeLine);
    expect(out.map((l) => l.id)).toEqual(lines.map((line, i) => ('id' in line ? line.id : i + 1)));
    out.forEach((l, i) => expect(l.length, `line ${i + 1}`).toBe(2 + (i % 17)));
  });
});

kitSuite('bert-cross-encoder', (model) => {
  const maxLengths = [...new Set(model.cases.cases.map((kase) => kase.tokenization?.max_length ?? 512))];
  for (const maxLength of maxLengths) {
    it(`score: every pair with max_length ${maxLength} within atol`, async () => {
      const cases = model.cases.cases.filter((kase) => (kase.tokenization?.max_length ?? 512) === maxLength);
      const lines = cases.flatMap((kase) =>
        PairsInput.parse(kase.inputs).pairs.map(([query, passage], i) => ({ id: `${kase.id}#${i}`, query, items: [passage] })),
      );
      const args = ['score', '--model', model.dir, ...(maxLength === 512 ? [] : ['--max-length', String(maxLength)])];
      const run = await runShoal(args, { stdin: jsonl(lines) });
      expectOk(run);
      const got = byId(parseJsonl(run.stdout, ScoreLine));
      for (const kase of cases) {
        const expected = z.looseObject({ scores: z.array(z.number()) }).parse(kase.expected).scores;
        expected.forEach((score, i) => {
          const line = got.get(`${kase.id}#${i}`);
          expect(line?.scores.map((s) => s.index)).toEqual([0]);
          expectAllClose([line?.scores[0]?.score ?? Number.NaN], [score], model.atol, `${kase.id}#${i}`);
        });
      }
    });
  }
});

kitSuite('bert-splade', (model) => {
  it('encode --output sparse: every case within atol (compared as dense vectors)', async () => {
    const lines = textLines(model);
    const run = await runShoal(['encode', '--model', model.dir, '--output', 'sparse'], { stdin: jsonl(lines) });
    expectOk(run);
    const got = byId(parseJsonl(run.stdout, SparseLine));
    const Expected = z.array(z.looseObject({ indices: z.array(z.number()), values: z.array(z.number()) }));
    for (const kase of model.cases.cases) {
      Expected.parse(kase.expected).forEach((expected, i) => {
        const actual = got.get(`${kase.id}#${i}`)?.sparse ?? { indices: [], values: [] };
        expect(actual.indices).toEqual([...actual.indices].sort((a, b) => a - b));
        const size = 30_522;
        expectAllClose(sparseToDense(actual, size), sparseToDense(expected, size), model.atol, `${kase.id}#${i}`);
      });
    }
  });
});

kitSuite('bert-colbert', (model) => {
  const kase = model.cases.cases[0];
  const inputs = ColbertInput.parse(kase?.inputs);
  const expected = z
    .looseObject({ query_vectors: z.unknown(), document_vectors: z.unknown(), maxsim_scores: z.unknown() })
    .parse(kase?.expected);

  it('encode --role query --output multivector: all 32 query vectors within atol', async () => {
    const lines = inputs.queries.map((text, i) => ({ id: `q${i}`, text }));
    const run = await runShoal(['encode', '--model', model.dir, '--role', 'query', '--output', 'multivector'], { stdin: jsonl(lines) });
    expectOk(run);
    const got = byId(parseJsonl(run.stdout, MultiLine));
    z.array(z.unknown()).parse(expected.query_vectors).forEach((matrix, i) => {
      const vectors = numberMatrix(matrix, `query ${i}`);
      const actual = got.get(`q${i}`)?.multivector ?? [];
      expect(actual).toHaveLength(vectors.length);
      vectors.forEach((vector, t) => expectAllClose(actual[t] ?? [], vector, model.atol, `query ${i} vector ${t}`));
    });
  });

  it('encode --role document: kept document vectors within atol', async () => {
    const lines = inputs.documents.map((text, i) => ({ id: `d${i}`, text }));
    const run = await runShoal(['encode', '--model', model.dir, '--role', 'document', '--output', 'multivector'], { stdin: jsonl(lines) });
    expectOk(run);
    const got = byId(parseJsonl(run.stdout, MultiLine));
    z.array(z.unknown()).parse(expected.document_vectors).forEach((matrix, i) => {
      const vectors = numberMatrix(matrix, `document ${i}`);
      const actual = got.get(`d${i}`)?.multivector ?? [];
      expect(actual).toHaveLength(vectors.length);
      vectors.forEach((vector, t) => expectAllClose(actual[t] ?? [], vector, model.atol, `document ${i} vector ${t}`));
    });
  });

  it('score: MaxSim of every query against every document within atol', async () => {
    const lines = inputs.queries.map((query, i) => ({ id: `q${i}`, query, items: inputs.documents }));
    const run = await runShoal(['score', '--model', model.dir], { stdin: jsonl(lines) });
    expectOk(run);
    const got = byId(parseJsonl(run.stdout, ScoreLine));
    numberMatrix(expected.maxsim_scores, 'maxsim_scores').forEach((row, q) => {
      const scores = got.get(`q${q}`)?.scores ?? [];
      const byIndex = row.map((_, d) => scores.find((s) => s.index === d)?.score ?? Number.NaN);
      expectAllClose(byIndex, row, model.atol, `query ${q}`);
      expect(scores.map((s) => s.score)).toEqual([...scores.map((s) => s.score)].sort((a, b) => b - a));
    });
  });
});

kitSuite('bert-token-classification', (model) => {
  for (const aggregation of ['simple', 'first'] as const) {
    it(`extract --aggregation ${aggregation}: entities exact, scores within atol`, async () => {
      const lines = textLines(model);
      const args = ['extract', '--model', model.dir, ...(aggregation === 'simple' ? [] : ['--aggregation', aggregation])];
      const run = await runShoal(args, { stdin: jsonl(lines) });
      expectOk(run);
      const got = byId(parseJsonl(run.stdout, ExtractLine));
      for (const kase of model.cases.cases) {
        NerExpected.parse(kase.expected).forEach((item, i) => {
          const want = aggregation === 'simple' ? item.entities_simple : item.entities_first;
          const entities = got.get(`${kase.id}#${i}`)?.entities ?? [];
          const label = `${kase.id}#${i}`;
          const text = lines.find((line) => line.id === label)?.text ?? '';
          expect(entities.map((e) => [e.label, e.start, e.end, e.text]), label).toEqual(
            want.map((e) => [e.entity_group, utf16Offset(text, e.start), utf16Offset(text, e.end), e.text]),
          );
          expectAllClose(entities.map((e) => e.score), want.map((e) => e.score), model.atol, label);
        });
      }
    });
  }
});
