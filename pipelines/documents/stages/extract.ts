import type { CallOptions, Engine } from '../../../adapters/protocol/engine.js';
import type { Entity } from '../../../adapters/protocol/results.js';
import type { PipelineDefinition } from '../definition.js';

/** The optional extract stage: entities per chunk, in large multi-document requests. */

const EXTRACT_REQUEST_ITEMS = 4_096;

export type ExtractSettings = NonNullable<PipelineDefinition['stages']['extract']>;

/** One JSON string per text: `[{"text","label","score","start","end"}, ...]` (offsets in the chunk text). */
export async function extractEntities(engine: Engine, texts: readonly string[], settings: ExtractSettings, call: CallOptions = {}): Promise<string[]> {
  const out: string[] = [];
  for (let at = 0; at < texts.length; at += EXTRACT_REQUEST_ITEMS) {
    const slice = texts.slice(at, at + EXTRACT_REQUEST_ITEMS);
    const result = await engine.extract(
      {
        model: settings.model,
        items: slice.map((text) => ({ text })),
        ...(settings.labels === undefined ? {} : { labels: settings.labels }),
        threshold: settings.threshold,
        priority: 'bulk',
      },
      call,
    );
    const entities = new Array<Entity[]>(slice.length).fill([]);
    for (const item of result.items) entities[item.index] = item.entities ?? [];
    for (const list of entities) out.push(JSON.stringify(list));
  }
  return out;
}
