import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { CHART_DIR, GO_MISSING, isFailure, renderChart, type Manifest } from './chart.js';
import { checkManifest, schemaProblems } from './k8s-models.js';

/**
 * The chart pointed at the image the image lane builds (`shoal:cpu`, never pulled: a local
 * cluster such as kind loads it), with every optional pool on (documents, classify), and on the
 * laptop overlay: every rendered manifest validates against the Kubernetes OpenAPI / KEDA CRD
 * schema of its kind, and every Shoal container runs that image.
 */

interface PodTemplate {
  spec: { template: { spec: { containers: Array<{ image: string; imagePullPolicy: string }>; initContainers?: Array<{ image: string }> } } };
}

function write(name: string, values: unknown): string {
  const file = join(mkdtempSync(join(tmpdir(), 'shoal-local-image-')), name);
  writeFileSync(file, stringify(values));
  return file;
}

function containers(manifests: readonly Manifest[]): Array<{ image: string; imagePullPolicy: string }> {
  return manifests
    .filter((m) => m.kind === 'Deployment' || m.kind === 'Job' || m.kind === 'StatefulSet')
    .flatMap((m) => (m as unknown as PodTemplate).spec.template.spec.containers);
}

describe.skipIf(GO_MISSING !== null)(`Helm chart with the lane's local image ${GO_MISSING ?? ''}`, () => {
  const local = write('local-image.yaml', { image: { repository: 'shoal', tag: 'cpu', pullPolicy: 'Never' }, documents: { enabled: true }, classify: { enabled: true } });

  it.each([
    ['defaults', [local]],
    ['laptop', [join(CHART_DIR, 'values-laptop.yaml'), local]],
  ])('%s: every manifest validates against its published schema, and every Shoal container runs shoal:cpu, never pulled', (_name, overlays) => {
    const rendered = renderChart(overlays);
    if (isFailure(rendered)) throw new Error(rendered.stderr);
    expect(schemaProblems(rendered.manifests)).toEqual([]);
    const kinds = new Set(rendered.manifests.map((m) => m.kind));
    for (const kind of ['Deployment', 'Job', 'ScaledObject', 'Service']) expect(kinds, kind).toContain(kind);
    const checks = rendered.manifests.map((m) => checkManifest(m).outcome);
    expect(checks.filter((c) => c !== 'valid' && c !== 'allow-listed')).toEqual([]);
    // Every container the chart renders is a Shoal one (gateway, pools, bootstrap Jobs).
    const all = containers(rendered.manifests);
    expect(all.length).toBeGreaterThanOrEqual(4);
    expect(new Set(all.map((c) => `${c.image} ${c.imagePullPolicy}`))).toEqual(new Set(['shoal:cpu Never']));
  });
});
