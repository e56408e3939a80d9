import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { REPO_ROOT } from '../helpers/shared.js';

/**
 * Renders the Helm chart with deploy/tools/helm-render (Go text/template + sprig: the engine Helm
 * uses; built here with Debian's golang-go and golang-github-masterminds-sprig-dev, offline).
 */

export const CHART_DIR = join(REPO_ROOT, 'deploy', 'helm', 'shoal');
export const GO_BIN = ['/usr/bin/go', '/usr/local/go/bin/go'].find((p) => existsSync(p)) ?? null;
export const SPRIG_DIR = '/usr/share/gocode/src/github.com/Masterminds/sprig';
export const GO_MISSING =
  GO_BIN === null || !existsSync(SPRIG_DIR)
    ? `skipped: the chart renderer needs Go and sprig (apt-get install golang-go golang-github-masterminds-sprig-dev; .ci/run installs them)`
    : null;

let built: string | null = null;

/** Builds the renderer once per test file (GOPATH mode against Debian's Go sources). */
export function helmRenderBinary(): string {
  if (built !== null) return built;
  if (GO_BIN === null) throw new Error(GO_MISSING ?? 'go missing');
  const dir = mkdtempSync(join(tmpdir(), 'shoal-helm-render-'));
  const out = join(dir, 'helm-render');
  const result = spawnSync(GO_BIN, ['build', '-o', out, './deploy/tools/helm-render'], {
    cwd: REPO_ROOT,
    env: { ...process.env, GO111MODULE: 'off', GOPATH: '/usr/share/gocode', GOCACHE: join(dir, 'cache'), GOFLAGS: '' },
    encoding: 'utf8',
  });
  if (result.status !== 0) throw new Error(`go build failed: ${result.stderr}`);
  built = out;
  return out;
}

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [key: string]: unknown;
}

export interface Rendered {
  /** Multi-document YAML, as `helm template` prints it. */
  text: string;
  manifests: Manifest[];
  /** The merged values the templates saw. */
  values: Record<string, unknown>;
}

export interface RenderFailure {
  status: number | null;
  stderr: string;
}

export function renderChart(overlays: readonly string[], extra: readonly string[] = []): Rendered | RenderFailure {
  const binary = helmRenderBinary();
  const valuesOut = join(mkdtempSync(join(tmpdir(), 'shoal-values-')), 'values.json');
  const args = ['--chart', CHART_DIR, '--release', 'shoal', '--namespace', 'shoal', '--values-out', valuesOut, ...overlays.flatMap((f) => ['-f', f]), ...extra];
  const result = spawnSync(binary, args, { encoding: 'utf8' });
  if (result.status !== 0) return { status: result.status, stderr: result.stderr };
  const manifests = parseAllDocuments(result.stdout).map((doc) => {
    if (doc.errors.length > 0) throw new Error(`rendered YAML does not parse: ${doc.errors.map((e) => e.message).join('; ')}`);
    return doc.toJSON() as Manifest;
  });
  return { text: result.stdout, manifests: manifests.filter((m) => m !== null), values: JSON.parse(readFileSync(valuesOut, 'utf8')) as Record<string, unknown> };
}

export function isFailure(result: Rendered | RenderFailure): result is RenderFailure {
  return 'stderr' in result;
}
