import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobBacklog, registerBacklogMetrics } from '../../adapters/nats/jobs/backlog.js';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { natsNames, type Primitive } from '../../adapters/protocol/subjects.js';
import { CHART_DIR, GO_MISSING, isFailure, renderChart, type Manifest, type Rendered } from './chart.js';
import { SCHEMAS } from './k8s-schemas.js';
import { checkManifest, installedVersion, SCHEMA_PACKAGES, schemaProblems, VALIDATORS, WITHOUT_PUBLISHED_SCHEMA } from './k8s-models.js';
import { startKubeDiscovery, type KubeDiscovery } from './kube-discovery.js';
import { envVariablesShoalReads } from './shoal-env.js';
import { SETTINGS } from '../../services/settings/table.js';
import { COMPONENTS } from '../../deploy/tools/nats-config.js';
import { REPO_ROOT } from '../helpers/shared.js';

/**
 * The Helm chart rendered by a real Go-template engine with sprig (deploy/tools/helm-render, a
 * stand-in for `helm template`) for its default values and each overlay, then checked: values
 * against values.schema.json (ajv, as Helm does on install), every manifest against the published
 * schemas of its kind (the Kubernetes OpenAPI spec through kubernetes-models, KEDA's CRDs through
 * @kubernetes-models/keda; ServiceMonitor and PrometheusRule have none: see k8s-models.ts) and
 * against strict zod schemas of the Kubernetes and KEDA fields it uses (which also catch unknown
 * fields, which the published schemas allow), every manifest parsed and mapped by kubectl's
 * client-side dry run, and the content against Shoal itself (consumer names, env variables, ports,
 * probes, the drain and cooldown invariants).
 */

/** The defaults with the optional worker roles on (documents, classify), so every check below covers their workloads too. */
const ROLES_OVERLAY = join(mkdtempSync(join(tmpdir(), 'shoal-roles-')), 'roles.yaml');
writeFileSync(ROLES_OVERLAY, stringify({ documents: { enabled: true }, classify: { enabled: true } }));
const OVERLAYS: Record<string, string[]> = {
  default: [],
  laptop: [join(CHART_DIR, 'values-laptop.yaml')],
  aws: [join(CHART_DIR, 'values-aws.yaml')],
  roles: [ROLES_OVERLAY],
};
const KUBECTL = ['/usr/bin/kubectl', '/usr/local/bin/kubectl'].find((p) => existsSync(p)) ?? null;


interface PoolValues {
  name: string;
  models: Array<{ id: string; primitives: Primitive[]; preload?: boolean }>;
}

function byKind(manifests: readonly Manifest[], kind: string): Manifest[] {
  return manifests.filter((m) => m.kind === kind);
}

/** The pool's settings as the chart merges them (workerDefaults, then the pool's own keys). */
function mergedPool(values: Record<string, unknown>, pool: Record<string, unknown>): Record<string, unknown> {
  const merge = (a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> => {
    const out: Record<string, unknown> = { ...a };
    for (const [k, v] of Object.entries(b)) {
      const cur = out[k];
      out[k] = cur !== null && typeof cur === 'object' && !Array.isArray(cur) && v !== null && typeof v === 'object' && !Array.isArray(v) ? merge(cur as Record<string, unknown>, v as Record<string, unknown>) : v;
    }
    return out;
  };
  return merge(values.workerDefaults as Record<string, unknown>, pool);
}

describe.skipIf(GO_MISSING !== null)(`Helm chart ${GO_MISSING ?? ''}`, () => {
  const rendered = new Map<string, Rendered>();
  let kube: KubeDiscovery | null = null;

  beforeAll(async () => {
    for (const [name, files] of Object.entries(OVERLAYS)) {
      const result = renderChart(files);
      if (isFailure(result)) throw new Error(`rendering ${name} failed: ${result.stderr}`);
      rendered.set(name, result);
    }
    if (KUBECTL !== null) kube = await startKubeDiscovery();
  }, 120_000);

  afterAll(async () => {
    await kube?.close();
  });

  const each = Object.keys(OVERLAYS);

  it.each(each)('%s: values pass values.schema.json', (name) => {
    const ajv = new Ajv({ allErrors: true, strict: false });
    const validate = ajv.compile(JSON.parse(readFileSync(join(CHART_DIR, 'values.schema.json'), 'utf8')) as object);
    const ok = validate(rendered.get(name)?.values);
    expect(validate.errors ?? []).toEqual([]);
    expect(ok).toBe(true);
  });

  it.each(each)('%s: every manifest matches the strict zod schema of its kind', (name) => {
    const manifests = rendered.get(name)?.manifests ?? [];
    expect(manifests.length).toBeGreaterThanOrEqual(14);
    const problems: string[] = [];
    for (const manifest of manifests) {
      const schema = SCHEMAS[manifest.kind];
      if (schema === undefined) {
        problems.push(`${manifest.kind} ${manifest.metadata.name}: no schema (a kind the chart should not render)`);
        continue;
      }
      const parsed = schema.safeParse(manifest);
      if (!parsed.success) problems.push(`${manifest.kind} ${manifest.metadata.name}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    }
    expect(problems).toEqual([]);
    const names = manifests.map((m) => `${m.kind}/${m.metadata.name}`);
    expect(new Set(names).size).toBe(names.length);
  });

  it.each(each)('%s: every manifest validates against the Kubernetes OpenAPI / KEDA CRD schema of its apiVersion and kind', (name) => {
    const manifests = rendered.get(name)?.manifests ?? [];
    expect(manifests.length).toBeGreaterThanOrEqual(14);
    expect(schemaProblems(manifests)).toEqual([]);
    const outcomes = manifests.map((m) => ({ kind: m.kind, check: checkManifest(m) }));
    // Only the documented kinds go without a published schema, and each has a zod schema instead.
    for (const { kind, check } of outcomes.filter((o) => o.check.outcome === 'allow-listed')) {
      expect(['ServiceMonitor', 'PrometheusRule']).toContain(kind);
      expect(SCHEMAS[kind], kind).toBeDefined();
      expect(check).toMatchObject({ reason: expect.stringContaining('zod') });
    }
    // Workloads, Services, Secrets, PDBs, ... and every ScaledObject were validated by a package.
    for (const kind of ['Deployment', 'Job', 'Service', 'PersistentVolumeClaim', 'ServiceAccount', 'ScaledObject']) {
      expect(outcomes.filter((o) => o.kind === kind).length, kind).toBeGreaterThan(0);
      for (const o of outcomes.filter((x) => x.kind === kind)) expect(o.check.outcome, kind).toBe('valid');
    }
    expect(outcomes.filter((o) => o.kind === 'ScaledObject').map((o) => o.check)).toEqual(
      outcomes.filter((o) => o.kind === 'ScaledObject').map(() => ({ outcome: 'valid', source: '@kubernetes-models/keda@0.4.2' })),
    );
  });

  it('the schema packages are the documented versions, and every kind the overlays render is validated or allow-listed', () => {
    for (const [pkg, version] of Object.entries(SCHEMA_PACKAGES)) expect(installedVersion(pkg as keyof typeof SCHEMA_PACKAGES), pkg).toBe(version);
    const kinds = new Set([...rendered.values()].flatMap((r) => r.manifests.map((m) => `${m.apiVersion} ${m.kind}`)));
    const validated = [...kinds].filter((k) => VALIDATORS.has(k)).sort();
    const allowListed = [...kinds].filter((k) => WITHOUT_PUBLISHED_SCHEMA.has(k)).sort();
    expect(validated).toEqual([
      'apps/v1 Deployment',
      'autoscaling/v2 HorizontalPodAutoscaler',
      'batch/v1 Job',
      'keda.sh/v1alpha1 ScaledObject',
      'networking.k8s.io/v1 Ingress',
      'policy/v1 PodDisruptionBudget',
      'v1 PersistentVolumeClaim',
      'v1 Secret',
      'v1 Service',
      'v1 ServiceAccount',
    ]);
    expect(allowListed).toEqual(['monitoring.coreos.com/v1 PrometheusRule', 'monitoring.coreos.com/v1 ServiceMonitor']);
    expect(validated.length + allowListed.length).toBe(kinds.size);
  });

  it('the schema check bites: broken manifests, unknown kinds and retired apiVersions are rejected', () => {
    const manifests = rendered.get('aws')?.manifests ?? [];
    const copy = <T>(m: T): T => structuredClone(m);
    const find = (kind: string): Manifest => {
      const found = manifests.find((m) => m.kind === kind);
      if (found === undefined) throw new Error(`aws renders no ${kind}`);
      return copy(found);
    };
    const problemsOf = (m: Manifest): string => schemaProblems([m]).join('\n');
    type Spec = Record<string, unknown> & { template: { spec: { containers: Array<Record<string, unknown> & { resources: { limits: Record<string, unknown> }; ports?: Array<Record<string, unknown>> }> } } };

    // A Deployment with replicas as a string.
    const deployment = find('Deployment');
    (deployment.spec as Spec).replicas = 'two';
    expect(problemsOf(deployment)).toMatch(/apps\/v1 Deployment shoal-\S+: invalid against kubernetes-models@4\.5\.1: \/spec\/replicas: must be integer/);
    // A container limit that is no Kubernetes quantity, a port that is no integer.
    const worker = copy(manifests.find((m) => m.kind === 'Deployment' && m.metadata.name === 'shoal-worker-gpu') as Manifest);
    const container = (worker.spec as Spec).template.spec.containers[0];
    if (container === undefined) throw new Error('no container');
    container.resources.limits.memory = '8 gigabytes';
    container.ports = [{ name: 'metrics', containerPort: '9464' }];
    expect(problemsOf(worker)).toMatch(/\/spec\/template\/spec\/containers\/0\/resources\/limits\/memory: must match format "quantity"/);
    expect(problemsOf(worker)).toMatch(/\/spec\/template\/spec\/containers\/0\/ports\/0\/containerPort: must be integer/);
    // A ScaledObject trigger without its type; trigger metadata that is not a string (KEDA wants strings).
    const scaled = find('ScaledObject');
    const triggers = (scaled.spec as { triggers: Array<Record<string, unknown> & { metadata: Record<string, unknown> }> }).triggers;
    delete triggers[0]?.type;
    if (triggers[1] !== undefined) triggers[1].metadata.lagThreshold = 64;
    else if (triggers[0] !== undefined) triggers[0].metadata.lagThreshold = 64;
    expect(problemsOf(scaled)).toMatch(/keda\.sh\/v1alpha1 ScaledObject \S+: invalid against @kubernetes-models\/keda@0\.4\.2: \/spec\/triggers\/0: must have required property type\b/);
    expect(problemsOf(scaled)).toMatch(/\/spec\/triggers\/\d\/metadata\/lagThreshold: must be string/);
    // A ScaledObject without scaleTargetRef; a PDB whose minAvailable is neither int nor string.
    const noTarget = find('ScaledObject');
    delete (noTarget.spec as Record<string, unknown>).scaleTargetRef;
    expect(problemsOf(noTarget)).toMatch(/\/spec: must have required property scaleTargetRef\b/);
    const pdb = find('PodDisruptionBudget');
    (pdb.spec as Record<string, unknown>).minAvailable = { pods: 1 };
    expect(problemsOf(pdb)).toMatch(/policy\/v1 PodDisruptionBudget \S+: invalid against kubernetes-models@4\.5\.1: \/spec\/minAvailable/);
    // A kind no package covers and that is not allow-listed, and a known kind under a retired apiVersion.
    const widget = { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' } } as Manifest;
    expect(problemsOf(widget)).toMatch(/example\.com\/v1 Widget w: no schema validator for this apiVersion and kind, and not on the allow-list/);
    const oldPdb = { ...find('PodDisruptionBudget'), apiVersion: 'policy/v1beta1' };
    expect(checkManifest(oldPdb)).toEqual({ outcome: 'no-validator' });
    // The untouched manifests still pass, so each rejection above is the edit's doing.
    expect(schemaProblems(manifests)).toEqual([]);
  });

  it('what the published schemas let through (unknown fields) is caught by the strict zod schemas', () => {
    const deployment = structuredClone(rendered.get('default')?.manifests.find((m) => m.kind === 'Deployment')) as Manifest & { spec: Record<string, unknown> };
    deployment.spec.replica = 3; // a typo of `replicas`
    // The Kubernetes OpenAPI spec does not forbid additional properties: the model accepts it ...
    expect(checkManifest(deployment)).toEqual({ outcome: 'valid', source: 'kubernetes-models@4.5.1' });
    // ... the zod schema of the chart's fields does not.
    const parsed = SCHEMAS.Deployment?.safeParse(deployment);
    expect(parsed?.success).toBe(false);
    expect(JSON.stringify(parsed?.error?.issues)).toContain('replica');
  });

  it.skipIf(KUBECTL === null)('every overlay is parsed and mapped by kubectl (client-side dry run)', async () => {
    for (const [name, result] of rendered) {
      const file = join(mkdtempSync(join(tmpdir(), 'shoal-kubectl-')), `${name}.yaml`);
      writeFileSync(file, result.text);
      // Asynchronous: the discovery server answering kubectl runs in this process.
      const run = await promisify(execFile)(KUBECTL ?? 'kubectl', ['apply', '--dry-run=client', '--validate=false', '-n', 'shoal', '--server', kube?.url ?? '', '-f', file, '-o', 'name'], { timeout: 30_000 });
      expect(run.stderr).toBe('');
      const objects = run.stdout.trim().split('\n');
      expect(objects.length).toBe(result.manifests.length);
      expect(objects).toContain('scaledobject.keda.sh/shoal-worker-text');
    }
  }, 60_000);

  it.each(each)('%s: KEDA triggers name the consumers Shoal creates, one per model and primitive', (name) => {
    const result = rendered.get(name);
    if (result === undefined) throw new Error('not rendered');
    const values = result.values as { pools: PoolValues[]; nats: { subjectPrefix: string; monitoringEndpoint: string } };
    const names = natsNames(values.nats.subjectPrefix);
    for (const pool of values.pools) {
      const scaled = byKind(result.manifests, 'ScaledObject').find((m) => m.metadata.name === `shoal-worker-${pool.name}`) as unknown as {
        spec: { triggers: Array<{ type: string; metadata: Record<string, string> }>; scaleTargetRef: { name: string } };
      };
      expect(scaled.spec.scaleTargetRef.name).toBe(`shoal-worker-${pool.name}`);
      expect(byKind(result.manifests, 'Deployment').some((d) => d.metadata.name === scaled.spec.scaleTargetRef.name)).toBe(true);
      const nats = scaled.spec.triggers.filter((t) => t.type === 'nats-jetstream');
      const expected = pool.models.flatMap((m) => m.primitives.map((p) => names.consumer(p, m.id)));
      expect(nats.map((t) => t.metadata.consumer)).toEqual(expected);
      for (const trigger of nats) {
        expect(trigger.metadata.stream).toBe(names.jobsStream);
        expect(trigger.metadata.natsServerMonitoringEndpoint).toBe(values.nats.monitoringEndpoint);
      }
      for (const trigger of scaled.spec.triggers.filter((t) => t.type === 'prometheus')) {
        expect(trigger.metadata.query).toMatch(/^max\(shoal_backlog_tokens\{primitive="(encode|score|extract)",model="[^"]+"\}\)$/);
      }
    }
  });

  it('the Prometheus trigger reads a metric the gateway registers', () => {
    const metrics = new ShoalMetrics({ processMetrics: false });
    registerBacklogMetrics(metrics, new JobBacklog({ jsm: {} as never, names: natsNames() }));
    const aws = rendered.get('aws');
    const queries = byKind(aws?.manifests ?? [], 'ScaledObject').flatMap((m) =>
      (m as unknown as { spec: { triggers: Array<{ type: string; metadata: Record<string, string> }> } }).spec.triggers.filter((t) => t.type === 'prometheus').map((t) => t.metadata.query ?? ''),
    );
    expect(queries.length).toBe(4);
    for (const query of queries) expect(metrics.registry.getSingleMetric(/shoal_[a-z_]+/.exec(query)?.[0] ?? '')).toBeDefined();
  });

  it.each(each)('%s: containers set only variables Shoal reads; probes and ports are the ones it serves', (name) => {
    const result = rendered.get(name);
    if (result === undefined) throw new Error('not rendered');
    const known = envVariablesShoalReads();
    const workloads = [...byKind(result.manifests, 'Deployment'), ...byKind(result.manifests, 'Job')] as unknown as Array<{
      metadata: { name: string };
      spec: { template: { spec: { containers: Array<{ args: string[]; env: Array<{ name: string; value?: string }>; ports?: Array<{ name: string; containerPort: number }>; readinessProbe?: { httpGet: { path: string; port: string } } }> } } };
    }>;
    for (const workload of workloads) {
      for (const container of workload.spec.template.spec.containers) {
        const unknown = container.env.map((e) => e.name).filter((n) => !known.has(n));
        expect(unknown, `${workload.metadata.name}`).toEqual([]);
        const env = new Map(container.env.map((e) => [e.name, e.value]));
        const role = container.args[0];
        if (role === 'gateway') {
          expect(container.ports?.[0]?.containerPort).toBe(Number(env.get('SHOAL_PORT')));
          expect(container.readinessProbe?.httpGet.path).toBe('/readyz');
        }
        if (role === 'worker') {
          // Loopback by default, as the gateway and the sink: in a pod it must listen on every interface to be scraped.
          expect(container.ports?.[0]).toEqual({ name: 'metrics', containerPort: Number(env.get('SHOAL_METRICS_PORT')) });
          expect(env.get('SHOAL_METRICS_HOST')).toBe('0.0.0.0');
          expect(container.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'metrics' });
          // A model pool names its models; a document or classify worker (`worker --documents`, `--classify`) encodes through the pools'.
          if (!container.args.includes('--documents') && !container.args.includes('--classify')) expect(env.get('SHOAL_MODELS')?.split(',').length).toBeGreaterThanOrEqual(1);
        }
        if (role === 'sink') {
          // The sink listens on loopback by default: in a pod it must listen on every interface to be scraped.
          expect(container.ports?.[0]).toEqual({ name: 'metrics', containerPort: Number(env.get('SHOAL_METRICS_PORT')) });
          expect(env.get('SHOAL_METRICS_HOST')).toBe('0.0.0.0');
          expect(container.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'metrics' });
          const service = byKind(result.manifests, 'Service').find((s) => s.metadata.name === `${workload.metadata.name}-metrics`) as unknown as { spec: { ports: Array<{ name: string; targetPort: string }> } } | undefined;
          expect(service?.spec.ports).toEqual([expect.objectContaining({ name: 'metrics', targetPort: 'metrics' })]);
        }
      }
    }
  });

  it.each(each)('%s: workers and the gateway outlive their drain, scale-to-zero pools cool down longer than a model load', (name) => {
    const result = rendered.get(name);
    if (result === undefined) throw new Error('not rendered');
    const pools = (result.values.pools as Array<Record<string, unknown>>).map((p) => mergedPool(result.values, p));
    for (const pool of pools) {
      const deployment = byKind(result.manifests, 'Deployment').find((d) => d.metadata.name === `shoal-worker-${String(pool.name)}`) as unknown as {
        spec: { template: { spec: { terminationGracePeriodSeconds: number; containers: Array<{ env: Array<{ name: string; value?: string }> }> } } };
      };
      const drainMs = Number(deployment.spec.template.spec.containers[0]?.env.find((e) => e.name === 'SHOAL_DRAIN_TIMEOUT_MS')?.value);
      expect(deployment.spec.template.spec.terminationGracePeriodSeconds * 1000).toBeGreaterThan(drainMs + 10_000);
      const scaled = byKind(result.manifests, 'ScaledObject').find((m) => m.metadata.name === `shoal-worker-${String(pool.name)}`) as unknown as { spec: { minReplicaCount: number; cooldownPeriod: number } };
      if (scaled.spec.minReplicaCount === 0) expect(scaled.spec.cooldownPeriod).toBeGreaterThan(Number(pool.modelLoadSeconds));
    }
    // The gateway stays up, not ready, for its drain delay, then lets requests finish: its grace period covers both.
    const gateway = byKind(result.manifests, 'Deployment').find((d) => d.metadata.name === 'shoal-gateway') as unknown as {
      spec: { template: { spec: { terminationGracePeriodSeconds: number; containers: Array<{ env: Array<{ name: string; value?: string }> }> } } };
    };
    const gatewayEnv = (key: string): number => Number(gateway.spec.template.spec.containers[0]?.env.find((e) => e.name === key)?.value);
    expect(gatewayEnv('SHOAL_DRAIN_DELAY_MS')).toBeGreaterThan(0);
    expect(gateway.spec.template.spec.terminationGracePeriodSeconds * 1000).toBeGreaterThan(gatewayEnv('SHOAL_DRAIN_DELAY_MS') + gatewayEnv('SHOAL_SHUTDOWN_TIMEOUT_MS'));
    // Every chart has a pool that scales to zero, with its cooldown from the values.
    expect(byKind(result.manifests, 'ScaledObject').some((m) => (m as unknown as { spec: { minReplicaCount: number } }).spec.minReplicaCount === 0)).toBe(true);
  });

  it('aws: the GPU pool requests a GPU on tainted spot nodes with the CUDA image', () => {
    const gpu = byKind(rendered.get('aws')?.manifests ?? [], 'Deployment').find((d) => d.metadata.name === 'shoal-worker-gpu') as unknown as {
      spec: { template: { spec: { nodeSelector: Record<string, string>; tolerations: unknown[]; containers: Array<{ image: string; resources: { limits: Record<string, unknown> }; env: Array<{ name: string; value?: string }> }> } } };
    };
    const pod = gpu.spec.template.spec;
    expect(pod.containers[0]?.resources.limits['nvidia.com/gpu']).toBe(1);
    expect(pod.containers[0]?.image).toBe('ghcr.io/shoal-project/shoal:0.1.0-cuda');
    expect(pod.containers[0]?.env.find((e) => e.name === 'SHOAL_PROVIDERS')?.value).toBe('cuda,cpu');
    expect(pod.nodeSelector).toEqual({ 'shoal.dev/node': 'gpu' });
    expect(pod.tolerations).toEqual([{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }]);
  });

  it('default: the NATS users Secret and the authorization block carry the same passwords and the permission file', () => {
    const manifests = rendered.get('default')?.manifests ?? [];
    const users = manifests.find((m) => m.metadata.name === 'shoal-nats') as unknown as { data: Record<string, string> };
    const auth = manifests.find((m) => m.metadata.name === 'shoal-nats-authorization') as unknown as { stringData: Record<string, string> };
    const conf = auth.stringData['shoal-authorization.conf'] ?? '';
    expect(Object.keys(users.data).sort()).toEqual(COMPONENTS.map((c) => `${c}-password`).sort());
    for (const component of COMPONENTS) {
      const password = Buffer.from(users.data[`${component}-password`] ?? '', 'base64').toString('utf8');
      expect(password).toMatch(/^[A-Za-z0-9]{32}$/);
      expect(conf).toMatch(new RegExp(`user: "${component}"\\n\\s+password: "${password}"\\n`));
    }
    expect(conf).toContain('"$JS.API.STREAM.MSG.DELETE.SHOAL_JOBS"');
    // No user deletes a stream; only the gateway and classify workers may purge, and the payload
    // object store only (deleting an object there is a filtered purge); the worker, sink and
    // documents users are denied every purge.
    const purging = ['gateway', 'classify'];
    expect(conf.match(/deny: \["\$JS\.API\.STREAM\.DELETE\.>", "\$JS\.API\.STREAM\.PURGE\.SHOAL_JOBS"/g)).toHaveLength(COMPONENTS.length);
    expect(conf.match(/"\$JS\.API\.STREAM\.PURGE\.>"/g)).toHaveLength(COMPONENTS.length - purging.length);
    // Each user's publish allow list: the purges it is granted.
    const granted = [...conf.matchAll(/user: "(\w+)"[\s\S]*?publish: \{ allow: \[([^\]]*)\]/g)].map(([, user = '', allow = '']) => [user, allow.match(/"\$JS\.API\.STREAM\.PURGE\.[^"]*"/g) ?? []]);
    expect(Object.fromEntries(granted)).toEqual(Object.fromEntries(COMPONENTS.map((c) => [c, purging.includes(c) ? ['"$JS.API.STREAM.PURGE.OBJ_shoal_payloads"'] : []])));
  });

  it.each(each)('%s: with a read-only root filesystem, every folder a container writes is a writable volume', (name) => {
    const result = rendered.get(name);
    if (result === undefined) throw new Error('not rendered');
    // The images' own environment (SHOAL_CACHE_DIR, HF_HOME, SHOAL_RESULTS_DIR), which a container inherits unless it sets them.
    const imageEnv = new Map<string, string>();
    for (const file of ['Dockerfile', 'Dockerfile.cuda']) {
      const text = readFileSync(join(REPO_ROOT, 'deploy', 'docker', file), 'utf8').replace(/\\\n/g, ' ');
      for (const line of text.split('\n').filter((l) => /^ENV\s/.test(l))) for (const m of line.matchAll(/([A-Z_][A-Z0-9_]*)=(\S+)/g)) imageEnv.set(m[1] ?? '', m[2] ?? '');
    }
    expect(imageEnv.get('SHOAL_CACHE_DIR')).toBe('/var/cache/shoal');
    // What Shoal writes: its cache (int8 and mapped graphs, tuning; the gateway's classification
    // results and category cache beneath it, services/gateway/config.ts), the hub cache, the
    // sink's and classification results folders, and /tmp.
    // Which role reads which of them is the settings table's `usedBy` (SHOAL_RESULTS_DIR: the sink only).
    const WRITTEN = [SETTINGS.cacheDir, SETTINGS.hubCache, SETTINGS.resultsDir, SETTINGS.classifyResultsDir];
    const writtenBy = (role: string): string[] => WRITTEN.filter((s) => s.usedBy.some((u) => u === 'all' || u === role)).flatMap((s) => [...s.env]);
    type Pod = {
      containers: Array<{ name: string; args: string[]; env: Array<{ name: string; value?: string }>; securityContext: { readOnlyRootFilesystem?: boolean }; volumeMounts: Array<{ name: string; mountPath: string; readOnly?: boolean }> }>;
      volumes: Array<{ name: string } & Record<string, unknown>>;
    };
    const workloads = [...byKind(result.manifests, 'Deployment'), ...byKind(result.manifests, 'Job')] as unknown as Array<{ metadata: { name: string }; spec: { template: { spec: Pod } } }>;
    expect(workloads.length).toBeGreaterThanOrEqual(4);
    const problems: string[] = [];
    for (const workload of workloads) {
      const pod = workload.spec.template.spec;
      for (const container of pod.containers) {
        if (container.securityContext.readOnlyRootFilesystem !== true) continue;
        const env = new Map(imageEnv);
        for (const e of container.env) if (e.value !== undefined) env.set(e.name, e.value);
        // The role: `gateway`, `worker`, `sink`, or the bootstrap Job's script, which starts `shoal.js worker`.
        const role = /shoal\.js (\w+)/.exec(container.args[0] ?? '')?.[1] ?? container.args[0] ?? '';
        expect(['gateway', 'worker', 'sink'], `${workload.metadata.name}/${container.name}`).toContain(role);
        const paths = [...writtenBy(role).flatMap((v) => (env.get(v) === undefined ? [] : [`${v}=${env.get(v) ?? ''}`])), 'tmp=/tmp'];
        for (const entry of paths) {
          const path = entry.slice(entry.indexOf('=') + 1);
          const mount = container.volumeMounts
            .filter((m) => path === m.mountPath || path.startsWith(`${m.mountPath.replace(/\/$/, '')}/`))
            .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
          const volume = pod.volumes.find((v) => v.name === mount?.name);
          const writable = mount !== undefined && mount.readOnly !== true && volume !== undefined && ['emptyDir', 'persistentVolumeClaim', 'ephemeral'].some((k) => k in volume);
          if (!writable) problems.push(`${workload.metadata.name}/${container.name}: ${entry} is not on a writable volume`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('the gateway Service keeps a client on one replica (ClientIP affinity, on by default, can be turned off)', () => {
    const service = (result: Rendered): { sessionAffinity?: string; sessionAffinityConfig?: { clientIP: { timeoutSeconds: number } } } =>
      (result.manifests.find((m) => m.kind === 'Service' && m.metadata.name === 'shoal-gateway') as unknown as { spec: { sessionAffinity?: string; sessionAffinityConfig?: { clientIP: { timeoutSeconds: number } } } }).spec;
    for (const name of each) {
      const result = rendered.get(name);
      if (result === undefined) throw new Error('not rendered');
      expect(service(result), name).toMatchObject({ sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 10800 } } });
    }
    const overlay = join(mkdtempSync(join(tmpdir(), 'shoal-overlay-')), 'noaffinity.yaml');
    writeFileSync(overlay, stringify({ gateway: { service: { sessionAffinity: 'None' } } }));
    const off = renderChart([overlay]);
    if (isFailure(off)) throw new Error(off.stderr);
    expect(service(off).sessionAffinity).toBeUndefined();
    expect(service(off).sessionAffinityConfig).toBeUndefined();
  });

  it('aws: GPU pods get a cache volume each (no ReadWriteOnce claim shared across nodes), and every component the S3 bucket and region', () => {
    const aws = rendered.get('aws');
    if (aws === undefined) throw new Error('not rendered');
    const volumesOf = (m: Manifest): Array<Record<string, unknown> & { name: string }> => (m as unknown as { spec: { template: { spec: { volumes: Array<Record<string, unknown> & { name: string }> } } } }).spec.template.spec.volumes;
    const gpu = byKind(aws.manifests, 'Deployment').find((d) => d.metadata.name === 'shoal-worker-gpu');
    if (gpu === undefined) throw new Error('no gpu pool');
    expect(volumesOf(gpu).find((v) => v.name === 'cache')).toMatchObject({
      ephemeral: { volumeClaimTemplate: { spec: { accessModes: ['ReadWriteOnce'], storageClassName: 'gp3', resources: { requests: { storage: '60Gi' } } } } },
    });
    for (const workload of [...byKind(aws.manifests, 'Deployment'), ...byKind(aws.manifests, 'Job')]) {
      expect(volumesOf(workload).some((v) => 'persistentVolumeClaim' in v && workload.metadata.name !== 'shoal-sink'), workload.metadata.name).toBe(false);
    }
    // Terraform adds the bucket and region as one more values file (modules/eks-shoal/main.tf).
    const overlay = join(mkdtempSync(join(tmpdir(), 'shoal-overlay-')), 's3.yaml');
    writeFileSync(overlay, stringify({ s3: { buckets: ['shoal-demo-shoal-123456789012'], region: 'eu-west-1' } }));
    const withBucket = renderChart([join(CHART_DIR, 'values-aws.yaml'), overlay]);
    if (isFailure(withBucket)) throw new Error(withBucket.stderr);
    for (const workload of [...byKind(withBucket.manifests, 'Deployment'), ...byKind(withBucket.manifests, 'Job')]) {
      const env = (workload as unknown as { spec: { template: { spec: { containers: Array<{ env: Array<{ name: string; value?: string }> }> } } } }).spec.template.spec.containers[0]?.env ?? [];
      expect(env.find((e) => e.name === 'SHOAL_S3_BUCKETS')?.value, workload.metadata.name).toBe('shoal-demo-shoal-123456789012');
      expect(env.find((e) => e.name === 'AWS_REGION')?.value, workload.metadata.name).toBe('eu-west-1');
    }
  });

  it('nats.streamReplicas sets SHOAL_STREAM_REPLICAS on every Shoal container (1 by default, 3 on AWS); the schema allows 1 to 5', () => {
    const replicasOf = (result: Rendered): Map<string, string | undefined> => {
      const out = new Map<string, string | undefined>();
      for (const workload of [...byKind(result.manifests, 'Deployment'), ...byKind(result.manifests, 'Job')]) {
        const containers = (workload as unknown as { spec: { template: { spec: { containers: Array<{ name: string; env: Array<{ name: string; value?: string }> }> } } } }).spec.template.spec.containers;
        for (const container of containers) out.set(`${workload.metadata.name}/${container.name}`, container.env.find((e) => e.name === 'SHOAL_STREAM_REPLICAS')?.value);
      }
      return out;
    };
    // The AWS overlay runs a 3-server NATS cluster (Terraform's NATS release) and replicates on all three.
    const expected: Record<string, string> = { default: '1', laptop: '1', aws: '3', roles: '1' };
    for (const name of each) {
      const values = [...replicasOf(rendered.get(name) ?? { text: '', manifests: [], values: {} }).values()];
      expect(values.length, name).toBeGreaterThan(0);
      expect(new Set(values), name).toEqual(new Set([expected[name]]));
    }
    const overlay = join(mkdtempSync(join(tmpdir(), 'shoal-overlay-')), 'replicas.yaml');
    writeFileSync(overlay, stringify({ nats: { streamReplicas: 3 } }));
    const clustered = renderChart([overlay]);
    if (isFailure(clustered)) throw new Error(clustered.stderr);
    const set = replicasOf(clustered);
    // Workers of every pool, the gateway, the sink and the consumer-bootstrap Jobs.
    for (const part of ['shoal-gateway/', 'shoal-sink/', 'shoal-worker-text/', 'shoal-consumers-text/']) expect([...set.keys()].some((key) => key.startsWith(part)), part).toBe(true);
    expect(new Set(set.values())).toEqual(new Set(['3']));
    const ajv = new Ajv({ allErrors: true, strict: false });
    const validate = ajv.compile(JSON.parse(readFileSync(join(CHART_DIR, 'values.schema.json'), 'utf8')) as object);
    const withReplicas = (replicas: unknown): boolean => {
      const values = structuredClone(clustered.values) as { nats: Record<string, unknown> };
      values.nats.streamReplicas = replicas;
      return validate(values);
    };
    expect([1, 3, 5].map(withReplicas)).toEqual([true, true, true]);
    expect([0, 6, 2.5, '3'].map(withReplicas)).toEqual([false, false, false, false]);
  });

  it('encodes model ids into consumer names exactly as Shoal does', () => {
    const models = ['Org.Name/model_v1.5', 'a b+c@rev:x', 'UPPER/lower-dash~tilde', 'x!y#z$%&()*,;<=>?[]^`{|}'];
    const dir = mkdtempSync(join(tmpdir(), 'shoal-overlay-'));
    const overlay = join(dir, 'odd.yaml');
    writeFileSync(overlay, stringify({ nats: { subjectPrefix: 'acme.search-1' }, pools: [{ name: 'odd', memoryBudget: '1GiB', models: models.map((id) => ({ id, primitives: ['encode', 'score'] })) }] }));
    const result = renderChart([overlay]);
    if (isFailure(result)) throw new Error(result.stderr);
    const consumers = (byKind(result.manifests, 'ScaledObject')[0] as unknown as { spec: { triggers: Array<{ metadata: Record<string, string> }> } }).spec.triggers.map((t) => t.metadata.consumer);
    const names = natsNames('acme.search-1');
    expect(consumers).toEqual(models.flatMap((m) => [names.consumer('encode', m), names.consumer('score', m)]));
    expect((byKind(result.manifests, 'ScaledObject')[0] as unknown as { spec: { triggers: Array<{ metadata: Record<string, string> }> } }).spec.triggers[0]?.metadata.stream).toBe(names.jobsStream);
  });

  it('refuses values that break the drain or the scale-to-zero invariants, saying what to change', () => {
    const dir = mkdtempSync(join(tmpdir(), 'shoal-overlay-'));
    const write = (name: string, values: unknown): string => {
      const path = join(dir, name);
      writeFileSync(path, stringify(values));
      return path;
    };
    const pool = { name: 'gpu', memoryBudget: '8GiB', models: [{ id: 'm', primitives: ['encode'] }] };
    const shortGrace = renderChart([write('grace.yaml', { pools: [{ ...pool, drainTimeoutMs: 60000, terminationGracePeriodSeconds: 60 }] })]);
    expect(isFailure(shortGrace) ? shortGrace.stderr : '').toMatch(/pool gpu: terminationGracePeriodSeconds \(60\) must exceed drainTimeoutMs\/1000 \+ 10 \(70\)/);
    const shortCooldown = renderChart([write('cool.yaml', { pools: [{ ...pool, modelLoadSeconds: 600, replicas: { min: 0, max: 2 }, keda: { cooldownPeriod: 300 } }] })]);
    expect(isFailure(shortCooldown) ? shortCooldown.stderr : '').toMatch(/pool gpu: keda.cooldownPeriod \(300 s\) must be longer than modelLoadSeconds \(600 s\)/);
    const noKeda = renderChart([write('nokeda.yaml', { keda: { enabled: false }, pools: [{ ...pool, replicas: { min: 0, max: 2 } }] })]);
    expect(isFailure(noKeda) ? noKeda.stderr : '').toMatch(/replicas.min 0 needs KEDA/);
    // The same pool with sound values renders.
    expect(isFailure(renderChart([write('ok.yaml', { pools: [{ ...pool, replicas: { min: 0, max: 2 } }] })]))).toBe(false);
  });
});
