import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Entity } from '../../adapters/protocol/results.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { conformanceSuite } from '../helpers/conformance.js';

/**
 * `offsets: codepoint` on the kit's entity models (token classification and GLiNER): texts with
 * emoji and other astral characters before and between the entities; the code-point spans slice
 * the same text out of `Array.from(text)` (Python's indexing) as the default UTF-16 spans do out
 * of the string, and the entities are otherwise identical.
 */

const TEXTS = [
  '🎉 Angela Merkel met Emmanuel Macron at the Élysée Palace in Paris 😀 on Tuesday.',
  '𝔗𝔥𝔢 Apple Inc. was founded by Steve Jobs 👩‍💻 in Cupertino, California, in 1976.',
];
const LABELS = ['person', 'organization', 'location', 'date'];

let engine: InferenceEngine;
beforeAll(() => {
  engine = new InferenceEngine({ runtime: { intraOpThreads: 1 }, interactiveSessions: false });
});
afterAll(async () => {
  await engine.close();
});

function checkOffsets(name: string, extra: { labels?: string[]; threshold?: number }): void {
  it('codepoint spans index Array.from(text) as utf16 spans index the string', async () => {
    const request = { model: name, items: TEXTS, ...extra };
    const utf16 = await engine.extract(request);
    const codepoint = await engine.extract({ ...request, offsets: 'codepoint' });
    const explicit = await engine.extract({ ...request, offsets: 'utf16' });
    expect(explicit.items).toEqual(utf16.items);
    let shifted = 0;
    utf16.items.forEach((item, i) => {
      const text = TEXTS[i] ?? '';
      const points = Array.from(text);
      const a: Entity[] = item.entities ?? [];
      const b: Entity[] = codepoint.items[i]?.entities ?? [];
      expect(b.map((e) => [e.text, e.label, e.score])).toEqual(a.map((e) => [e.text, e.label, e.score]));
      a.forEach((entity, k) => {
        const other = b[k];
        expect(text.slice(entity.start, entity.end)).toBe(entity.text);
        expect(points.slice(other?.start, other?.end).join('')).toBe(entity.text);
        expect(other?.start).toBe(Array.from(text.slice(0, entity.start)).length);
        if (other?.start !== entity.start) shifted++;
      });
    });
    // The texts start with astral characters: some entity must have moved.
    expect(shifted).toBeGreaterThan(0);
  });
}

conformanceSuite('bert-token-classification', (model) => checkOffsets(model.dir, {}));
conformanceSuite('gliner-span', (model) => checkOffsets(model.dir, { labels: LABELS, threshold: 0.3 }));
