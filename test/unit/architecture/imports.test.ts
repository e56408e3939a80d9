import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { importCircles, importGraph, layerViolations } from '../../helpers/import-graph.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const SOURCE = ['adapters', 'pipelines', 'services'];

describe('architecture: imports', () => {
  it('finds a deliberately introduced circle of type-only imports (fixture), and only its members', () => {
    const graph = importGraph(ROOT, ['test/fixtures/import-circle']);
    expect(graph.edges.size).toBe(3);
    expect(importCircles(graph)).toEqual([['test/fixtures/import-circle/left.ts', 'test/fixtures/import-circle/right.ts']]);
  });

  it('the source tree has no import circle (type and lazy imports included)', () => {
    const graph = importGraph(ROOT, SOURCE);
    expect(graph.edges.size).toBeGreaterThan(150);
    expect(importCircles(graph)).toEqual([]);
  });

  it('imports flow services → pipelines → adapters, never back', () => {
    const graph = importGraph(ROOT, SOURCE);
    expect(layerViolations(graph, ['services', 'pipelines', 'adapters'])).toEqual([]);
  });
});
