import type { Engine } from '../../adapters/protocol/engine.js';
import type { ParseOptions } from './document.js';
import { DocumentParser } from './parse.js';
import { capParseSettings, type ParseLimits } from './parse-limits.js';
import type { ParseTaskSettings } from '../../adapters/protocol/ingest.js';

/**
 * The parsers of a worker role (`--parse`, `--documents`), one per distinct parse setting after
 * the worker's ceilings (a task or pipeline asks; `limits` decide: maxPages cannot be raised to
 * 1,000,000), kept for later documents. Past `max` the oldest is closed (each holds parse
 * threads; documents it is still reading fail with UNAVAILABLE and are redone).
 */
export class ParserCache {
  readonly #engine: Engine;
  readonly #limits: Partial<ParseLimits>;
  readonly #signal: AbortSignal;
  readonly #max: number;
  readonly #onPage: ParseOptions['onPage'];
  readonly #parsers = new Map<string, DocumentParser>();

  /** `onPage` is told of every page any of the parsers reads (a documents worker's progress). */
  constructor(engine: Engine, limits: Partial<ParseLimits>, signal: AbortSignal, options: { max?: number; onPage?: ParseOptions['onPage'] } = {}) {
    this.#engine = engine;
    this.#limits = limits;
    this.#signal = signal;
    this.#max = options.max ?? 4;
    this.#onPage = options.onPage;
  }

  /** The parser of `requested` (a parse task's settings, or a pipeline's parse stage); furniture absent is kept, as before the option. */
  get(requested: ParseTaskSettings): DocumentParser {
    const settings = capParseSettings(requested, this.#limits);
    const key = JSON.stringify(settings);
    let parser = this.#parsers.get(key);
    if (parser === undefined) {
      if (this.#parsers.size >= this.#max) {
        const [oldestKey, oldest] = this.#parsers.entries().next().value ?? [];
        if (oldestKey !== undefined) this.#parsers.delete(oldestKey);
        void oldest?.close();
      }
      parser = new DocumentParser(this.#engine, { ...settings, furniture: settings.furniture ?? 'keep', signal: this.#signal, ...(this.#onPage === undefined ? {} : { onPage: this.#onPage }) });
      this.#parsers.set(key, parser);
    }
    return parser;
  }

  async close(): Promise<void> {
    const parsers = [...this.#parsers.values()];
    this.#parsers.clear();
    await Promise.all(parsers.map((parser) => parser.close()));
  }
}
