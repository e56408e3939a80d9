import type { CallOptions, Engine } from '../../../adapters/protocol/engine.js';
import { labelsTaxonomy, type Taxonomy } from '../../../adapters/taxonomy/index.js';
import { categoryIndex, packRows, topK, type PackedMatrix } from '../../classify/index.js';
import type { PipelineDefinition } from '../definition.js';
import { encodeDense } from './encode.js';

/**
 * The optional classify stage, on the taxonomy classification module (pipelines/classify): the
 * labels form a one-level taxonomy whose category matrix is embedded once per run; each chunk
 * gets the labels whose cosine similarity reaches the threshold (best first, at most topK), found
 * by the module's packed float32 search. The chunk vectors of the encode stage are reused when
 * the stage names no other model and they are plain float32 of the model's full dimension.
 */

export type ClassifySettings = NonNullable<PipelineDefinition['stages']['classify']>;

export class LabelClassifier {
  readonly #engine: Engine;
  readonly #settings: ClassifySettings;
  readonly #encodeModel: string;
  /** False when the encode stage's vectors are typed or truncated (they do not compare with the labels'). */
  readonly #reuse: boolean;
  readonly #taxonomy: Taxonomy;
  #labels: Promise<PackedMatrix> | null = null;

  constructor(engine: Engine, settings: ClassifySettings, encodeModel: string, reuseChunkVectors = true) {
    this.#engine = engine;
    this.#settings = settings;
    this.#encodeModel = encodeModel;
    this.#reuse = reuseChunkVectors;
    this.#taxonomy = labelsTaxonomy(settings.labels);
  }

  get #model(): string {
    return this.#settings.model ?? this.#encodeModel;
  }

  /** One JSON string per chunk: `[{"label","score"}, ...]`. */
  async classify(texts: readonly string[], chunkVectors: readonly Float32Array[], call: CallOptions = {}): Promise<string[]> {
    this.#labels ??= categoryIndex(this.#engine, this.#taxonomy, { model: this.#model, template: '{name}', role: 'document' }, null, call).then((index) => index.matrix);
    const labels = await this.#labels;
    const vectors = this.#reuse && this.#model === this.#encodeModel ? chunkVectors : await encodeDense(this.#engine, texts, { model: this.#model, role: 'document' }, call);
    if (vectors.length === 0) return [];
    // At most 1,024 labels: the scan is small enough for this thread (no search thread to manage).
    const queries = packRows(vectors, labels.dim);
    const k = Math.min(this.#settings.topK, labels.rows);
    const found = topK(labels, queries.data, vectors.length, k);
    return vectors.map((_, at) => {
      const scored: { label: string; score: number }[] = [];
      for (let i = 0; i < k; i++) {
        const index = found.indices[at * k + i] ?? -1;
        const score = found.scores[at * k + i] ?? 0;
        if (index < 0 || score < this.#settings.threshold) continue;
        scored.push({ label: this.#taxonomy.categories[index]?.id ?? '', score: Math.round(score * 1e6) / 1e6 });
      }
      return JSON.stringify(scored);
    });
  }
}
