import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { FIXTURES_DIR } from './shared.js';

/**
 * The committed fixture models (test/fixtures/models, written by test/fixtures/generate.ts) and
 * a plain-TypeScript forward pass of their graphs, computed from the weights in each folder's
 * fixture.json. Family tests compare what the engine returns with these references, computed one
 * unpadded item at a time: a correct engine gives the same numbers whatever the batch padding.
 */

const Matrix = z.array(z.array(z.number()));
type Matrix = z.infer<typeof Matrix>;

const FixtureFile = z.strictObject({
  name: z.string(),
  hidden: z.number().int(),
  inputs: z.strictObject({ positionIds: z.boolean(), tokenTypes: z.boolean() }),
  encoder: z.strictObject({
    embeddings: Matrix,
    positions: Matrix,
    types: Matrix.nullable(),
    mask: z.array(z.number()),
    context: Matrix,
  }),
  head: z.discriminatedUnion('kind', [
    z.strictObject({ kind: z.literal('token'), weights: Matrix, bias: z.array(z.number()).nullable(), lexicon: Matrix.nullable() }),
    z.strictObject({ kind: z.literal('first'), weights: Matrix, bias: z.array(z.number()) }),
    z.strictObject({
      kind: z.literal('gliner'),
      start: Matrix,
      end: Matrix,
      classes: Matrix,
      bias: z.number(),
      invalidLogit: z.number(),
      entTokenId: z.number().int(),
      maxWidth: z.number().int(),
    }),
  ]),
});
type FixtureFile = z.infer<typeof FixtureFile>;

const TokenizerVocab = z.looseObject({
  added_tokens: z.array(z.looseObject({ id: z.number().int(), content: z.string() })),
  model: z.looseObject({ vocab: z.record(z.string(), z.number().int()) }),
});

export interface TinyModel {
  name: string;
  dir: string;
  weights: FixtureFile;
  /** Token string → id, from the folder's tokenizer.json (vocabulary and added tokens). */
  id(token: string): number;
  ids(tokens: readonly string[]): number[];
}

export function fixtureDir(name: string): string {
  return join(FIXTURES_DIR, 'models', name);
}

export function loadTinyModel(name: string): TinyModel {
  const dir = fixtureDir(name);
  const weights = FixtureFile.parse(JSON.parse(readFileSync(join(dir, 'fixture.json'), 'utf8')));
  const tokenizer = TokenizerVocab.parse(JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')));
  const vocab = new Map<string, number>(Object.entries(tokenizer.model.vocab));
  for (const added of tokenizer.added_tokens) vocab.set(added.content, added.id);
  const id = (token: string): number => {
    const found = vocab.get(token);
    if (found === undefined) throw new Error(`${name}: token ${JSON.stringify(token)} is not in the fixture vocabulary`);
    return found;
  };
  return { name, dir, weights, id, ids: (tokens) => tokens.map(id) };
}

/** One unpadded sequence as the graph should see it. */
export interface SequenceInput {
  ids: readonly number[];
  /** Token types; all 0 when absent. */
  types?: readonly number[];
  /** Position ids; arange when absent. */
  positions?: readonly number[];
  /** Attention mask; all 1 when absent. */
  mask?: readonly number[];
}

function row(m: Matrix, index: number, what: string): number[] {
  const r = m[index];
  if (r === undefined) throw new Error(`${what} row ${index} out of range`);
  return r;
}

export function matVec(vector: readonly number[], matrix: Matrix): number[] {
  const width = matrix[0]?.length ?? 0;
  const out = new Array<number>(width).fill(0);
  vector.forEach((x, k) => {
    const r = matrix[k] ?? [];
    for (let j = 0; j < width; j++) out[j] = (out[j] ?? 0) + x * (r[j] ?? 0);
  });
  return out;
}

export function dot(a: readonly number[], b: readonly number[]): number {
  return a.reduce((sum, x, i) => sum + x * (b[i] ?? 0), 0);
}

/** h[t] of the shared encoder (see test/fixtures/build/encoder-graph.ts). */
export function hiddenStates(model: TinyModel, input: SequenceInput): number[][] {
  const { encoder } = model.weights;
  const n = input.ids.length;
  const mask = input.mask ?? new Array<number>(n).fill(1);
  const x0 = input.ids.map((id, t) => {
    const position = input.positions?.[t] ?? t;
    const e = row(encoder.embeddings, id, 'embedding');
    const p = row(encoder.positions, position, 'position');
    const type = encoder.types === null ? null : row(encoder.types, input.types?.[t] ?? 0, 'type');
    const m = mask[t] ?? 0;
    return e.map((v, d) => v + (p[d] ?? 0) + (type?.[d] ?? 0) + m * (encoder.mask[d] ?? 0));
  });
  const hidden = model.weights.hidden;
  const sum = new Array<number>(hidden).fill(0);
  let count = 0;
  x0.forEach((x, t) => {
    if ((mask[t] ?? 0) !== 1) return;
    count++;
    matVec(x, encoder.context).forEach((v, d) => {
      sum[d] = (sum[d] ?? 0) + Math.tanh(v);
    });
  });
  const context = sum.map((v) => v / Math.max(count, 1));
  return x0.map((x) => x.map((v, d) => Math.tanh(v + (context[d] ?? 0))));
}

/** h · W (+ b) (+ lexicon[id]) at every position of `input`: token embeddings, MLM or NER logits. */
export function tokenOutputs(model: TinyModel, input: SequenceInput): number[][] {
  const head = model.weights.head;
  if (head.kind !== 'token') throw new Error(`${model.name} has a ${head.kind} head`);
  return hiddenStates(model, input).map((h, t) => {
    const lexicon = head.lexicon === null ? null : row(head.lexicon, input.ids[t] ?? -1, 'lexicon');
    return matVec(h, head.weights).map((v, j) => v + (head.bias?.[j] ?? 0) + (lexicon?.[j] ?? 0));
  });
}

/** Cross-encoder logit: h[0] · w + b. */
export function firstTokenLogit(model: TinyModel, hidden: readonly number[][]): number {
  const head = model.weights.head;
  if (head.kind !== 'first') throw new Error(`${model.name} has a ${head.kind} head`);
  return (matVec(hidden[0] ?? [], head.weights)[0] ?? Number.NaN) + (head.bias[0] ?? 0);
}

/**
 * GLiNER span logits [start][width][label] for one text: `firstTokens[k]` is the position of
 * word k's first sub-token; spans running past the last word are left out (null).
 */
export function glinerLogits(model: TinyModel, ids: readonly number[], firstTokens: readonly number[]): (number[] | null)[][] {
  const head = model.weights.head;
  if (head.kind !== 'gliner') throw new Error(`${model.name} has a ${head.kind} head`);
  const hidden = hiddenStates(model, { ids });
  const labels: number[][] = [];
  ids.forEach((id, t) => {
    if (id !== head.entTokenId) return;
    const sum = (hidden[t] ?? []).map((v, d) => v + (hidden[t + 1]?.[d] ?? 0));
    labels.push(matVec(sum, head.classes));
  });
  const words = firstTokens.map((t) => hidden[t] ?? []);
  return words.map((_, start) =>
    Array.from({ length: head.maxWidth }, (_unused, width) => {
      const end = start + width;
      if (end >= words.length) return null;
      const a = matVec(words[start] ?? [], head.start);
      const b = matVec(words[end] ?? [], head.end);
      const span = a.map((v, d) => Math.tanh(v + (b[d] ?? 0)));
      return labels.map((label) => dot(span, label) + head.bias);
    }),
  );
}

export function meanPool(vectors: readonly number[][], keep: (t: number) => boolean = () => true): number[] {
  const width = vectors[0]?.length ?? 0;
  const out = new Array<number>(width).fill(0);
  let count = 0;
  vectors.forEach((v, t) => {
    if (!keep(t)) return;
    count++;
    v.forEach((x, d) => {
      out[d] = (out[d] ?? 0) + x;
    });
  });
  return out.map((x) => x / Math.max(count, 1e-9));
}

export function l2Normalize(vector: readonly number[]): number[] {
  const norm = Math.max(Math.sqrt(dot(vector, vector)), 1e-12);
  return vector.map((v) => v / norm);
}

export function cosine(a: readonly number[], b: readonly number[]): number {
  return dot(a, b) / Math.max(Math.sqrt(dot(a, a)) * Math.sqrt(dot(b, b)), 1e-12);
}

export function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x));
}

export function softmax(logits: readonly number[]): number[] {
  const max = Math.max(...logits);
  const exps = logits.map((v) => Math.exp(v - max));
  const total = exps.reduce((a, b) => a + b, 0);
  return exps.map((v) => v / total);
}

export function argmax(values: readonly number[]): number {
  let best = 0;
  values.forEach((v, i) => {
    if (v > (values[best] ?? Number.NEGATIVE_INFINITY)) best = i;
  });
  return best;
}

export function arange(n: number, from = 0): number[] {
  return Array.from({ length: n }, (_, i) => from + i);
}

/** Largest element-wise difference; used to show a test would notice a mistake. */
export function maxAbsDiff(a: readonly number[], b: readonly number[]): number {
  let worst = a.length === b.length ? 0 : Number.POSITIVE_INFINITY;
  a.forEach((v, i) => {
    worst = Math.max(worst, Math.abs(v - (b[i] ?? Number.NaN)));
  });
  return worst;
}
