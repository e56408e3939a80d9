import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Ajv } from 'ajv';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyJobNames } from '../../adapters/protocol/classify-jobs.js';
import { natsNames } from '../../adapters/protocol/subjects.js';
import { SETTINGS } from '../../services/settings/table.js';
import { CHART_DIR, GO_MISSING, isFailure, renderChart, type Manifest, type Rendered } from './chart.js';
import { schemaProblems } from './k8s-models.js';
import { SCHEMAS } from './k8s-schemas.js';
import { startKubeDiscovery, type KubeDiscovery } from './kube-discovery.js';
import { envVariablesShoalReads } from './shoal-env.js';

/**
 * The chart's classify workers (`classify.enabled`): the Deployment of `shoal worker --classify`,
 * its KEDA ScaledObject (one nats-jetstream trigger on the one classify consumer), its
 * consumer-bootstrap Job and the gateway's SHOAL_CLASSIFY_JOBS, rendered by the Go renderer
 * (chart.ts) with an odd subject prefix, and checked against the schemas (values.schema.json, the
 * published Kubernetes/KEDA schemas, the strict zod ones), against Shoal's own names
 * (classifyJobNames, the settings table) and against the model pools' settings.
 */

const KUBECTL = ['/usr/bin/kubectl', '/usr/local/bin/kubectl'].find((p) => existsSync(p)) ?? null;
const PREFIX = 'acme.search-1';
/** The variables that name the role and the gateway's job modes, as Shoal reads them. */
const CLASSIFY_ROLE = SETTINGS.classifyRole.env[0];
const CLASSIFY_JOBS = SETTINGS.classifyJobs.env[0];
const DOCUMENT_JOBS = SETTINGS.documentJobs.env[0];

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string } };
}
interface Container {
  args: string[];
  command?: string[];
  env: EnvVar[];
  ports?: unknown[];
  startupProbe?: unknown;
  readinessProbe?: unknown;
  livenessProbe?: unknown;
  volumeMounts: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
}
interface Workload {
  metadata: Manifest['metadata'];
  spec: { replicas?: number; template: { spec: { terminationGracePeriodSeconds?: number; containers: Container[]; volumes: Array<{ name: string }> } } };
}
interface Trigger {
  type: string;
  metadata: Record<string, string>;
}
interface Scaled {
  metadata: Manifest['metadata'];
  spec: { scaleTargetRef: { name: string }; minReplicaCount: number; maxReplicaCount: number; cooldownPeriod: number; advanced: { horizontalPodAutoscalerConfig: { behavior: { scaleDown: { stabilizationWindowSeconds: number } } } }; triggers: Trigger[] };
}

function find<T>(result: Rendered, kind: string, name: string): T {
  const found = result.manifests.find((m) => m.kind === kind && m.metadata.name === name);
  if (found === undefined) throw new Error(`no ${kind} ${name} rendered`);
  return found as unknown as T;
}
const envOf = (container: Container | undefined): Map<string, EnvVar> => new Map((container?.env ?? []).map((e) => [e.name, e]));
const valueOf = (container: Container | undefined, name: string | undefined): string | undefined => envOf(container).get(name ?? '')?.value;

describe.skipIf(GO_MISSING !== null)(`Helm chart: classify workers ${GO_MISSING ?? ''}`, () => {
  const dir = mkdtempSync(join(tmpdir(), 'shoal-classify-overlay-'));
  const write = (name: string, values: unknown): string => {
    const path = join(dir, name);
    writeFileSync(path, stringify(values));
    return path;
  };
  const overlay = write('classify.yaml', {
    nats: { subjectPrefix: PREFIX, streamReplicas: 3 },
    s3: { buckets: ['shoal-results'], region: 'eu-west-1' },
    classify: { enabled: true },
  });
  let result: Rendered;
  let laptop: Rendered;
  let kube: KubeDiscovery | null = null;

  beforeAll(async () => {
    const rendered = renderChart([overlay]);
    if (isFailure(rendered)) throw new Error(`rendering with classify failed: ${rendered.stderr}`);
    result = rendered;
    const onLaptop = renderChart([join(CHART_DIR, 'values-laptop.yaml'), write('laptop-classify.yaml', { classify: { enabled: true } })]);
    if (isFailure(onLaptop)) throw new Error(`rendering the laptop overlay with classify failed: ${onLaptop.stderr}`);
    laptop = onLaptop;
    if (KUBECTL !== null) kube = await startKubeDiscovery();
  }, 120_000);

  afterAll(async () => {
    await kube?.close();
  });

  it('values pass values.schema.json, and every manifest the published and the strict zod schema of its kind', () => {
    const ajv = new Ajv({ allErrors: true, strict: false });
    const validate = ajv.compile(JSON.parse(readFileSync(join(CHART_DIR, 'values.schema.json'), 'utf8')) as object);
    for (const rendered of [result, laptop]) {
      validate(rendered.values);
      expect(validate.errors ?? []).toEqual([]);
      expect(schemaProblems(rendered.manifests)).toEqual([]);
      const problems = rendered.manifests.flatMap((m) => {
        const parsed = SCHEMAS[m.kind]?.safeParse(m);
        return parsed === undefined ? [`${m.kind}: no schema`] : parsed.success ? [] : [`${m.kind} ${m.metadata.name}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`];
      });
      expect(problems).toEqual([]);
    }
    // Values the worker could not run with, and keys the chart does not know, are refused by the schema.
    const classify = result.values.classify as Record<string, unknown>;
    for (const wrong of [{ ackWaitMs: 10 }, { maxDeliver: 0 }, { replicas: { min: -1, max: 4 } }, { keda: { lagThreshold: 0 } }, { pipelines: ['x'] }, { memoryBudget: '1GiB' }]) {
      expect(validate({ ...result.values, classify: { ...classify, ...wrong } }), JSON.stringify(wrong)).toBe(false);
    }
  });

  it('the ScaledObject scales the classify Deployment from zero on its one consumer, named as the protocol names it', () => {
    const names = classifyJobNames(natsNames(PREFIX));
    const scaled = find<Scaled>(result, 'ScaledObject', 'shoal-classify');
    expect(scaled.spec.scaleTargetRef.name).toBe('shoal-classify');
    // KEDA owns the replica count: the Deployment sets none.
    expect(find<Workload>(result, 'Deployment', 'shoal-classify').spec.replicas).toBeUndefined();
    expect(scaled.spec.minReplicaCount).toBe(0);
    expect(scaled.spec.maxReplicaCount).toBe(4);
    expect(scaled.spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.stabilizationWindowSeconds).toBe(scaled.spec.cooldownPeriod);
    const triggers = scaled.spec.triggers;
    expect(triggers.map((t) => [t.type, t.metadata.stream, t.metadata.consumer])).toEqual([['nats-jetstream', names.stream, names.consumer]]);
    // The same names spelled out: the prefix's stream and consumer forms.
    expect([names.stream, names.consumer]).toEqual(['ACME_SEARCH_1_CLASSIFY', 'acme_search_1_classify']);
    const pool = find<Scaled>(result, 'ScaledObject', 'shoal-worker-text').spec.triggers[0];
    const [trigger] = triggers;
    // The monitoring endpoint and account the pools' triggers use; lag thresholds from classify.keda.
    expect(trigger?.metadata.natsServerMonitoringEndpoint).toBe(pool?.metadata.natsServerMonitoringEndpoint);
    expect(trigger?.metadata.account).toBe(pool?.metadata.account);
    expect(trigger?.metadata).toMatchObject({ lagThreshold: '8', activationLagThreshold: '0' });
    // On the default prefix: shoal_classify on SHOAL_CLASSIFY.
    const defaults = find<Scaled>(laptop, 'ScaledObject', 'shoal-classify');
    const plain = classifyJobNames(natsNames());
    expect(defaults.spec.triggers.map((t) => `${t.metadata.stream}/${t.metadata.consumer}`)).toEqual([`${plain.stream}/${plain.consumer}`]);
    expect(plain.stream).toBe('SHOAL_CLASSIFY');
  });

  it('the bootstrap Job creates the consumer before the ScaledObject exists, as a classify worker with the Deployment\'s environment', () => {
    const scaled = find<Scaled>(result, 'ScaledObject', 'shoal-classify');
    const job = find<Workload>(result, 'Job', 'shoal-classify-consumers');
    const poolJob = find<Workload>(result, 'Job', 'shoal-consumers-text');
    expect(scaled.metadata.annotations).toMatchObject({ 'helm.sh/hook': 'post-install,post-upgrade', 'helm.sh/hook-weight': '10' });
    expect(job.metadata.annotations).toMatchObject({ 'helm.sh/hook': 'post-install,post-upgrade', 'helm.sh/hook-weight': '0' });
    expect(Number(job.metadata.annotations?.['helm.sh/hook-weight'])).toBeLessThan(Number(scaled.metadata.annotations?.['helm.sh/hook-weight']));
    const container = job.spec.template.spec.containers[0];
    const poolContainer = poolJob.spec.template.spec.containers[0];
    expect(container?.command).toEqual(['/bin/sh', '-c']);
    // The pools' script (start, wait for /readyz, SIGTERM, wait), with the classify role's flag.
    expect(container?.args[0]).toContain('node /app/bin/shoal.js worker --classify --metrics-port 9464 --metrics-host 127.0.0.1 & pid=$!');
    expect(container?.args[0]).toBe(poolContainer?.args[0]?.replace('worker --concurrency 1 ', 'worker --classify '));
    // Every variable of the Job is the Deployment's, and the Deployment has none the topology
    // depends on that the Job lacks: only its process settings (drain, threads, metrics port and
    // host, which the script sets itself, worker id) are its own.
    const deployed = find<Workload>(result, 'Deployment', 'shoal-classify').spec.template.spec.containers[0];
    const own = new Set(['SHOAL_DRAIN_TIMEOUT_MS', 'SHOAL_THREADS', 'SHOAL_METRICS_PORT', 'SHOAL_METRICS_HOST', 'SHOAL_WORKER_ID']);
    expect(container?.env).toEqual((deployed?.env ?? []).filter((e) => !own.has(e.name)));
    for (const name of [CLASSIFY_ROLE, 'NATS_USER', 'SHOAL_SUBJECT_PREFIX', 'SHOAL_STREAM_REPLICAS', 'SHOAL_ACK_WAIT_MS', 'SHOAL_MAX_DELIVER']) expect(envOf(container).has(name ?? ''), name).toBe(true);
    expect(valueOf(container, 'SHOAL_STREAM_REPLICAS')).toBe('3');
    // The consumer's ack wait (the worker extends it while a chunk is in flight) and the deliveries after which a chunk fails its run.
    expect(valueOf(container, 'SHOAL_ACK_WAIT_MS')).toBe('60000');
    expect(valueOf(container, 'SHOAL_MAX_DELIVER')).toBe('5');
    expect(container?.volumeMounts).toEqual(deployed?.volumeMounts);
  });

  it('the Deployment runs `shoal worker --classify` as the classify NATS user, with the pools\' connection, S3 and probes', () => {
    const pod = find<Workload>(result, 'Deployment', 'shoal-classify').spec.template.spec;
    const container = pod.containers[0];
    const worker = find<Workload>(result, 'Deployment', 'shoal-worker-text').spec.template.spec.containers[0];
    expect(container?.args).toEqual(['worker', SETTINGS.classifyRole.flag]);
    expect(valueOf(container, CLASSIFY_ROLE)).toBe('1');
    // The connection and S3 settings of the model pools (S3: s3:// result targets); its own NATS user and password key.
    for (const name of ['NATS_URL', 'SHOAL_SUBJECT_PREFIX', 'SHOAL_STREAM_REPLICAS', 'SHOAL_LOG_LEVEL', 'SHOAL_S3_BUCKETS', 'AWS_REGION', 'SHOAL_METRICS_PORT', 'SHOAL_METRICS_HOST', 'SHOAL_CACHE_DIR', 'HF_HOME']) {
      expect(valueOf(container, name), name).toBe(valueOf(worker, name));
      expect(valueOf(container, name), name).toBeDefined();
    }
    expect(valueOf(container, 'NATS_USER')).toBe('classify');
    expect(envOf(container).get('NATS_PASSWORD')?.valueFrom).toEqual({ secretKeyRef: { name: 'shoal-nats', key: 'classify-password' } });
    const users = find<{ data: Record<string, string> }>(result, 'Secret', 'shoal-nats');
    expect(Buffer.from(users.data['classify-password'] ?? '', 'base64').toString('utf8')).toMatch(/^[A-Za-z0-9]{32}$/);
    // No models of its own: the encoders are the pools'.
    expect(envOf(container).has('SHOAL_MODELS')).toBe(false);
    // Metrics port and probes exactly as the worker pools have them.
    expect(container?.ports).toEqual(worker?.ports);
    expect([container?.startupProbe, container?.readinessProbe, container?.livenessProbe]).toEqual([worker?.startupProbe, worker?.readinessProbe, worker?.livenessProbe]);
    expect((pod.terminationGracePeriodSeconds ?? 0) * 1000).toBeGreaterThan(Number(valueOf(container, 'SHOAL_DRAIN_TIMEOUT_MS')) + 10_000);
    // Every variable is one Shoal reads.
    const known = envVariablesShoalReads();
    expect((container?.env ?? []).map((e) => e.name).filter((n) => !known.has(n))).toEqual([]);
    // A headless metrics Service for the ServiceMonitor.
    const service = find<{ spec: { clusterIP: string; ports: unknown[] } }>(result, 'Service', 'shoal-classify-metrics');
    expect(service.spec).toMatchObject({ clusterIP: 'None', ports: [{ name: 'metrics', port: 9464, targetPort: 'metrics' }] });
  });

  it('the gateway publishes classification jobs with classify.enabled and document jobs with documents.enabled, and neither by default', () => {
    const gatewayEnv = (rendered: Rendered): Map<string, EnvVar> => envOf(find<Workload>(rendered, 'Deployment', 'shoal-gateway').spec.template.spec.containers[0]);
    expect(SETTINGS.classifyJobs.usedBy).toContain('gateway');
    expect(SETTINGS.documentJobs.usedBy).toContain('gateway');
    expect(gatewayEnv(result).get(CLASSIFY_JOBS ?? '')?.value).toBe('1');
    expect(gatewayEnv(result).has(DOCUMENT_JOBS ?? '')).toBe(false);
    const both = renderChart([overlay, write('documents.yaml', { documents: { enabled: true } })]);
    if (isFailure(both)) throw new Error(both.stderr);
    expect(gatewayEnv(both).get(CLASSIFY_JOBS ?? '')?.value).toBe('1');
    expect(gatewayEnv(both).get(DOCUMENT_JOBS ?? '')?.value).toBe('1');
    const defaults = renderChart([]);
    if (isFailure(defaults)) throw new Error(defaults.stderr);
    expect(gatewayEnv(defaults).has(CLASSIFY_JOBS ?? '')).toBe(false);
    expect(gatewayEnv(defaults).has(DOCUMENT_JOBS ?? '')).toBe(false);
  });

  it('renders nothing for classify workers by default, but their NATS user', () => {
    const defaults = renderChart([]);
    if (isFailure(defaults)) throw new Error(defaults.stderr);
    expect(defaults.manifests.filter((m) => m.metadata.name.includes('classify')).map((m) => `${m.kind}/${m.metadata.name}`)).toEqual([]);
    // The classify NATS user exists anyway, so turning the role on later needs no new Secret.
    const auth = defaults.manifests.find((m) => m.metadata.name === 'shoal-nats-authorization') as unknown as { stringData: Record<string, string> };
    expect(auth.stringData['shoal-authorization.conf']).toMatch(/user: "classify"\n\s+password: "[A-Za-z0-9]{32}"\n/);
  });

  it('refuses drain and scale-to-zero values it cannot serve, saying what to change', () => {
    const refused = (values: unknown): string => {
      const rendered = renderChart([overlay, write('refused.yaml', values)]);
      return isFailure(rendered) ? rendered.stderr : '';
    };
    expect(refused({ classify: { drainTimeoutMs: 60000, terminationGracePeriodSeconds: 60 } })).toMatch(/classify: terminationGracePeriodSeconds \(60\) must exceed drainTimeoutMs\/1000 \+ 10 \(70\)/);
    expect(refused({ classify: { keda: { enabled: false } } })).toMatch(/classify: replicas.min 0 needs KEDA/);
    expect(refused({ classify: { replicas: { min: 5, max: 4 } } })).toMatch(/classify: replicas.min > replicas.max/);
    // Without KEDA and with a minimum of 1, a fixed replica count and no ScaledObject or bootstrap Job.
    const fixed = renderChart([overlay, write('fixed.yaml', { classify: { keda: { enabled: false }, replicas: { min: 1, max: 1 } } })]);
    if (isFailure(fixed)) throw new Error(fixed.stderr);
    expect(find<Workload>(fixed, 'Deployment', 'shoal-classify').spec.replicas).toBe(1);
    expect(fixed.manifests.filter((m) => ['ScaledObject', 'Job', 'PodDisruptionBudget'].includes(m.kind) && m.metadata.name.includes('classify'))).toEqual([]);
  });

  it.skipIf(KUBECTL === null)('the classify render is parsed and mapped by kubectl (client-side dry run)', async () => {
    const file = join(dir, 'classify-manifests.yaml');
    writeFileSync(file, result.text);
    const run = await promisify(execFile)(KUBECTL ?? 'kubectl', ['apply', '--dry-run=client', '--validate=false', '-n', 'shoal', '--server', kube?.url ?? '', '-f', file, '-o', 'name'], { timeout: 30_000 });
    expect(run.stderr).toBe('');
    const objects = run.stdout.trim().split('\n');
    expect(objects.length).toBe(result.manifests.length);
    expect(objects).toEqual(expect.arrayContaining(['scaledobject.keda.sh/shoal-classify', 'deployment.apps/shoal-classify', 'job.batch/shoal-classify-consumers', 'service/shoal-classify-metrics']));
  }, 60_000);
});
