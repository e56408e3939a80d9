import { expect, it } from 'vitest';
import { z } from 'zod';
import { conformanceDir } from '../helpers/conformance.js';
import { jsonl, parseJsonl, runShoal } from '../helpers/shoal-cli.js';

/** `shoal extract --offsets codepoint`: spans that index the text as Python does (`Array.from` here). */

const TEXT = '🎉😀 Angela Merkel met Emmanuel Macron at the Élysée Palace in Paris on Tuesday.';
const Entity = z.strictObject({ text: z.string(), label: z.string(), score: z.number(), start: z.number(), end: z.number() });
const Line = z.strictObject({ id: z.number(), entities: z.array(Entity) });

it('--offsets codepoint shifts spans past astral characters; the default stays UTF-16', async () => {
  const model = conformanceDir('bert-token-classification');
  const stdin = jsonl([{ id: 1, text: TEXT }]);
  const [utf16, points] = await Promise.all([
    runShoal(['extract', '--model', model], { stdin }),
    runShoal(['extract', '--model', model, '--offsets', 'codepoint'], { stdin }),
  ]);
  expect(utf16.code, utf16.stderr).toBe(0);
  expect(points.code, points.stderr).toBe(0);
  const a = parseJsonl(utf16.stdout, Line)[0]?.entities ?? [];
  const b = parseJsonl(points.stdout, Line)[0]?.entities ?? [];
  expect(a.length).toBeGreaterThan(0);
  expect(b.map((e) => e.text)).toEqual(a.map((e) => e.text));
  a.forEach((entity, i) => {
    expect(TEXT.slice(entity.start, entity.end)).toBe(entity.text);
    expect(Array.from(TEXT).slice(b[i]?.start, b[i]?.end).join('')).toBe(entity.text);
    // Two emoji before every entity: two UTF-16 units more than code points.
    expect(entity.start - (b[i]?.start ?? 0)).toBe(2);
  });
});
