import type { CallOptions, Engine } from '../../../adapters/protocol/engine.js';
import type { PipelineDefinition } from '../definition.js';
import { encodeDense } from './encode.js';

/**
 * The optional classify stage, labels only for now: each label is embedded once, each chunk gets
 * the labels whose cosine similarity to its embedding reaches the threshold (best first, at most
 * topK). The chunk vectors of the encode stage are reused when the stage names no other model.
 * (Taxonomies with cross-encoder reranking will come from the taxonomy classification module.)
 */

export type ClassifySettings = NonNullable<PipelineDefinition['stages']['classify']>;

function norm(vector: Float32Array): number {
  let sum = 0;
  for (const value of vector) sum += value * value;
  return Math.sqrt(sum);
}

function cosine(a: Float32Array, normA: number, b: Float32Array, normB: number): number {
  let dot = 0;
  for (let i = 0; i < a.length; i += 1) dot += (a[i] ?? 0) * (b[i] ?? 0);
  return normA === 0 || normB === 0 ? 0 : dot / (normA * normB);
}

export class LabelClassifier {
  readonly #engine: Engine;
  readonly #settings: ClassifySettings;
  readonly #encodeModel: string;
  #labels: Promise<{ vector: Float32Array; norm: number }[]> | null = null;

  constructor(engine: Engine, settings: ClassifySettings, encodeModel: string) {
    this.#engine = engine;
    this.#settings = settings;
    this.#encodeModel = encodeModel;
  }

  get #model(): string {
    return this.#settings.model ?? this.#encodeModel;
  }

  /** One JSON string per chunk: `[{"label","score"}, ...]`. */
  async classify(texts: readonly string[], chunkVectors: readonly Float32Array[], call: CallOptions = {}): Promise<string[]> {
    this.#labels ??= encodeDense(this.#engine, this.#settings.labels, { model: this.#model, role: 'document' }, call).then((vectors) =>
      vectors.map((vector) => ({ vector, norm: norm(vector) })),
    );
    const labels = await this.#labels;
    const vectors = this.#model === this.#encodeModel ? chunkVectors : await encodeDense(this.#engine, texts, { model: this.#model, role: 'document' }, call);
    return vectors.map((vector) => {
      const vectorNorm = norm(vector);
      const scored = labels
        .map((label, index) => ({ label: this.#settings.labels[index] ?? '', score: cosine(vector, vectorNorm, label.vector, label.norm) }))
        .filter((entry) => entry.score >= this.#settings.threshold)
        .sort((a, b) => b.score - a.score)
        .slice(0, this.#settings.topK)
        .map((entry) => ({ label: entry.label, score: Math.round(entry.score * 1e6) / 1e6 }));
      return JSON.stringify(scored);
    });
  }
}
