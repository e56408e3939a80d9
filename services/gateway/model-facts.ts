import type { Engine } from '../../adapters/protocol/engine.js';
import { DEFAULT_LIMITS } from '../../adapters/protocol/limits.js';

/**
 * What TEI's /info and /tokenize need to know of a model and the Engine interface does not say:
 * its maximum input length and the special tokens its template adds. Both are learned from the
 * model's own tokenizer with one tokenize call of two texts: the empty text (its tokens are the
 * template's special tokens alone, e.g. `[CLS] [SEP]`) and a text longer than any model reads
 * (cut to the model's maximum, so its token count is that maximum). Works the same in-process and
 * over NATS, and costs one small call per model: answers are kept, single-flight, per model name;
 * a failed probe is forgotten so the next request asks again.
 */

export interface ModelFacts {
  /** Tokens the model reads, special tokens included (longer inputs are cut or refused). */
  maxInputLength: number;
  /** Ids of the special tokens around a single text, in order (the tokenization of ""). */
  templateIds: readonly number[];
}

/** One word per token in every tokenizer, more words than any model's maximum (Shoal's cap of max_length). */
const LONG_TEXT = 'a '.repeat(DEFAULT_LIMITS.maxSequenceLength + 1);

/** Model names kept; any client can name any model (route prefixes), so the map is bounded. */
const MAX_MODELS = 256;

export class ModelFactsCache {
  readonly #engine: Engine;
  readonly #facts = new Map<string, Promise<ModelFacts>>();

  constructor(engine: Engine) {
    this.#engine = engine;
  }

  /** The facts of `model`; rejects with the engine's error (MODEL_NOT_FOUND, UNAVAILABLE...). */
  get(model: string): Promise<ModelFacts> {
    const known = this.#facts.get(model);
    if (known !== undefined) return known;
    const probe = this.#probe(model);
    probe.catch(() => {
      if (this.#facts.get(model) === probe) this.#facts.delete(model);
    });
    if (this.#facts.size >= MAX_MODELS) {
      const oldest = this.#facts.keys().next();
      if (oldest.done !== true) this.#facts.delete(oldest.value);
    }
    this.#facts.set(model, probe);
    return probe;
  }

  async #probe(model: string): Promise<ModelFacts> {
    const result = await this.#engine.tokenize({ model, items: ['', LONG_TEXT] });
    const [empty, long] = [result.items[0], result.items[1]];
    const templateIds = empty?.ids ?? [];
    // Not cut (a tokenizer that merged the words): the model reads at least this much, up to Shoal's cap.
    const maxInputLength = long === undefined || !long.truncated ? DEFAULT_LIMITS.maxSequenceLength : long.ids.length;
    return { maxInputLength, templateIds };
  }
}
