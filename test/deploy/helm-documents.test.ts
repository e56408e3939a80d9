import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Ajv } from 'ajv';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { documentNames } from './document-names.js';
import { CHART_DIR, GO_MISSING, isFailure, renderChart, type Manifest, type Rendered } from './chart.js';
import { schemaProblems } from './k8s-models.js';
import { SCHEMAS } from './k8s-schemas.js';
import { startKubeDiscovery, type KubeDiscovery } from './kube-discovery.js';
import { envVariablesShoalReads } from './shoal-env.js';

/**
 * The chart's document workers (`documents.enabled`): the Deployment of `shoal worker --documents`,
 * its KEDA ScaledObject (one nats-jetstream trigger per pipeline consumer, plus the runs consumer),
 * its consumer-bootstrap Job, rendered by the Go renderer (chart.ts) with an odd subject prefix
 * and pipeline names that need escaping, and checked against the schemas (values.schema.json,
 * the published Kubernetes/KEDA schemas, the strict zod ones), against Shoal's own name
 * derivation (natsNames' prefix forms, modelToken) and against the model pools' settings.
 */

const KUBECTL = ['/usr/bin/kubectl', '/usr/local/bin/kubectl'].find((p) => existsSync(p)) ?? null;
const PREFIX = 'acme.search-1';
// Plain, with "_" (escaped as _5F, like a model token) and with upper case and "-" (kept).
const PIPELINES = ['documents', 'legal_v2', 'Contracts-EU'];
const INDEXES = { docs: 'postgres://shoal@pg.db.svc:5432/search?table=docs', wiki: 'qdrant://qdrant.db.svc:6333/wiki' };
const MOUNT = '/etc/shoal/pipelines';

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
  spec: { replicas?: number; template: { spec: { terminationGracePeriodSeconds?: number; containers: Container[]; volumes: Array<{ name: string; configMap?: { name: string } }> } } };
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
const valueOf = (container: Container | undefined, name: string): string | undefined => envOf(container).get(name)?.value;

describe.skipIf(GO_MISSING !== null)(`Helm chart: document workers ${GO_MISSING ?? ''}`, () => {
  const dir = mkdtempSync(join(tmpdir(), 'shoal-documents-overlay-'));
  const write = (name: string, values: unknown): string => {
    const path = join(dir, name);
    writeFileSync(path, stringify(values));
    return path;
  };
  const overlay = write('documents.yaml', {
    nats: { subjectPrefix: PREFIX },
    s3: { buckets: ['shoal-docs'], region: 'eu-west-1' },
    indexes: INDEXES,
    documents: { enabled: true, pipelines: PIPELINES, pipelinesConfigMap: 'shoal-pipelines' },
  });
  let result: Rendered;
  let laptop: Rendered;
  let kube: KubeDiscovery | null = null;

  beforeAll(async () => {
    const rendered = renderChart([overlay]);
    if (isFailure(rendered)) throw new Error(`rendering with documents failed: ${rendered.stderr}`);
    result = rendered;
    const onLaptop = renderChart([join(CHART_DIR, 'values-laptop.yaml'), write('laptop-documents.yaml', { documents: { enabled: true } })]);
    if (isFailure(onLaptop)) throw new Error(`rendering the laptop overlay with documents failed: ${onLaptop.stderr}`);
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
    // A pipeline name Shoal could not use as a subject token is refused by the schema.
    for (const pipelines of [['a.b'], ['x y'], [], ['a'.repeat(65)], ['dup', 'dup']]) {
      expect(validate({ ...result.values, documents: { ...(result.values.documents as object), pipelines } }), JSON.stringify(pipelines)).toBe(false);
    }
  });

  it('the ScaledObject scales the documents Deployment from zero on one trigger per pipeline consumer, plus the runs consumer', () => {
    const names = documentNames(PREFIX);
    const scaled = find<Scaled>(result, 'ScaledObject', 'shoal-documents');
    expect(scaled.spec.scaleTargetRef.name).toBe('shoal-documents');
    const deployment = find<Workload>(result, 'Deployment', 'shoal-documents');
    // KEDA owns the replica count: the Deployment sets none.
    expect(deployment.spec.replicas).toBeUndefined();
    expect(scaled.spec.minReplicaCount).toBe(0);
    expect(scaled.spec.maxReplicaCount).toBe(4);
    expect(scaled.spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.stabilizationWindowSeconds).toBe(scaled.spec.cooldownPeriod);
    const triggers = scaled.spec.triggers;
    expect(triggers.every((t) => t.type === 'nats-jetstream')).toBe(true);
    expect(triggers.map((t) => [t.metadata.stream, t.metadata.consumer])).toEqual([
      ...PIPELINES.map((p) => [names.stream, names.consumer(p)]),
      [names.runsStream, names.runsConsumer],
    ]);
    // The same names spelled out: the prefix's forms and the pipeline tokens escaped as model tokens.
    expect(triggers.map((t) => t.metadata.consumer)).toEqual(['acme_search_1_documents_documents', 'acme_search_1_documents_legal_5Fv2', 'acme_search_1_documents_Contracts-EU', 'acme_search_1_runs']);
    expect(new Set(triggers.map((t) => t.metadata.stream))).toEqual(new Set(['ACME_SEARCH_1_DOCUMENTS', 'ACME_SEARCH_1_RUNS']));
    const pool = find<Scaled>(result, 'ScaledObject', 'shoal-worker-text').spec.triggers[0];
    for (const trigger of triggers) {
      // The monitoring endpoint and account the pools' triggers use; lag thresholds from documents.keda.
      expect(trigger.metadata.natsServerMonitoringEndpoint).toBe(pool?.metadata.natsServerMonitoringEndpoint);
      expect(trigger.metadata.account).toBe(pool?.metadata.account);
      expect(trigger.metadata).toMatchObject({ lagThreshold: '8', activationLagThreshold: '0' });
    }
    // The default pipeline alone, on the default prefix: shoal_documents_documents on SHOAL_DOCUMENTS.
    const defaults = laptop.manifests.find((m) => m.kind === 'ScaledObject' && m.metadata.name === 'shoal-documents') as unknown as Scaled;
    expect(defaults.spec.triggers.map((t) => `${t.metadata.stream}/${t.metadata.consumer}`)).toEqual(['SHOAL_DOCUMENTS/shoal_documents_documents', 'SHOAL_RUNS/shoal_runs']);
    // documents.keda.runsTrigger off: the pipeline consumers only.
    const noRuns = renderChart([overlay, write('noruns.yaml', { documents: { keda: { runsTrigger: false } } })]);
    if (isFailure(noRuns)) throw new Error(noRuns.stderr);
    expect(find<Scaled>(noRuns, 'ScaledObject', 'shoal-documents').spec.triggers.map((t) => t.metadata.consumer)).toEqual(PIPELINES.map((p) => names.consumer(p)));
  });

  it('the bootstrap Job creates the consumers before the ScaledObject exists, as a document worker with the Deployment settings', () => {
    const scaled = find<Scaled>(result, 'ScaledObject', 'shoal-documents');
    const job = find<Workload>(result, 'Job', 'shoal-documents-consumers');
    const poolJob = find<Workload>(result, 'Job', 'shoal-consumers-text');
    expect(scaled.metadata.annotations).toMatchObject({ 'helm.sh/hook': 'post-install,post-upgrade', 'helm.sh/hook-weight': '10' });
    expect(job.metadata.annotations).toMatchObject({ 'helm.sh/hook': 'post-install,post-upgrade', 'helm.sh/hook-weight': '0' });
    expect(Number(job.metadata.annotations?.['helm.sh/hook-weight'])).toBeLessThan(Number(scaled.metadata.annotations?.['helm.sh/hook-weight']));
    const container = job.spec.template.spec.containers[0];
    const poolContainer = poolJob.spec.template.spec.containers[0];
    expect(container?.command).toEqual(['/bin/sh', '-c']);
    // The pools' script (start, wait for /readyz, SIGTERM, wait), with the document role's flag.
    expect(container?.args[0]).toContain('node /app/bin/shoal.js worker --documents --metrics-port 9464 --metrics-host 127.0.0.1 & pid=$!');
    expect(container?.args[0]).toBe(poolContainer?.args[0]?.replace('worker --concurrency 1 ', 'worker --documents '));
    const deployment = find<Workload>(result, 'Deployment', 'shoal-documents').spec.template.spec;
    const deployed = deployment.containers[0];
    for (const name of ['NATS_URL', 'SHOAL_SUBJECT_PREFIX', 'NATS_USER', 'SHOAL_DOCUMENTS', 'SHOAL_DOCUMENT_PIPELINES', 'SHOAL_PIPELINES', 'SHOAL_ACK_WAIT_MS', 'SHOAL_MAX_DELIVER', 'SHOAL_INDEXES', 'SHOAL_S3_BUCKETS']) {
      expect(envOf(container).get(name), name).toEqual(envOf(deployed).get(name));
      expect(envOf(container).has(name), name).toBe(true);
    }
    expect(envOf(container).get('NATS_PASSWORD')).toEqual(envOf(deployed).get('NATS_PASSWORD'));
    // The consumers get the ack wait and deliveries the role's work needs (a document takes longer than a job part).
    expect(valueOf(container, 'SHOAL_ACK_WAIT_MS')).toBe('60000');
    expect(valueOf(container, 'SHOAL_MAX_DELIVER')).toBe('5');
    expect(container?.volumeMounts).toContainEqual({ name: 'pipelines', mountPath: MOUNT, readOnly: true });
    expect(job.spec.template.spec.volumes).toContainEqual({ name: 'pipelines', configMap: { name: 'shoal-pipelines' } });
  });

  it('the Deployment runs `shoal worker --documents` as the documents NATS user, with the pools\' connection, S3 and probes and the gateway\'s indexes', () => {
    const pod = find<Workload>(result, 'Deployment', 'shoal-documents').spec.template.spec;
    const container = pod.containers[0];
    const worker = find<Workload>(result, 'Deployment', 'shoal-worker-text').spec.template.spec.containers[0];
    const gateway = find<Workload>(result, 'Deployment', 'shoal-gateway').spec.template.spec.containers[0];
    const sink = find<Workload>(result, 'Deployment', 'shoal-sink').spec.template.spec.containers[0];
    expect(container?.args).toEqual(['worker', '--documents']);
    expect(valueOf(container, 'SHOAL_DOCUMENTS')).toBe('1');
    expect(valueOf(container, 'SHOAL_DOCUMENT_PIPELINES')).toBe(PIPELINES.join(','));
    // Pipeline files from the ConfigMap, read-only where SHOAL_PIPELINES points.
    expect(valueOf(container, 'SHOAL_PIPELINES')).toBe(MOUNT);
    expect(container?.volumeMounts).toContainEqual({ name: 'pipelines', mountPath: MOUNT, readOnly: true });
    expect(pod.volumes).toContainEqual({ name: 'pipelines', configMap: { name: 'shoal-pipelines' } });
    // The connection and S3 settings of the model pools; its own NATS user and password key.
    for (const name of ['NATS_URL', 'SHOAL_SUBJECT_PREFIX', 'SHOAL_LOG_LEVEL', 'SHOAL_S3_BUCKETS', 'AWS_REGION', 'SHOAL_METRICS_PORT', 'SHOAL_METRICS_HOST', 'SHOAL_CACHE_DIR', 'HF_HOME']) {
      expect(valueOf(container, name), name).toBe(valueOf(worker, name));
      expect(valueOf(container, name), name).toBeDefined();
    }
    expect(valueOf(container, 'NATS_USER')).toBe('documents');
    expect(envOf(container).get('NATS_PASSWORD')?.valueFrom).toEqual({ secretKeyRef: { name: 'shoal-nats', key: 'documents-password' } });
    const users = find<{ data: Record<string, string> }>(result, 'Secret', 'shoal-nats');
    expect(Buffer.from(users.data['documents-password'] ?? '', 'base64').toString('utf8')).toMatch(/^[A-Za-z0-9]{32}$/);
    // The indexes the gateway searches and the sink writes, by the same names.
    expect(valueOf(container, 'SHOAL_INDEXES')).toBe(`docs=${INDEXES.docs},wiki=${INDEXES.wiki}`);
    expect(valueOf(gateway, 'SHOAL_INDEXES')).toBe(valueOf(container, 'SHOAL_INDEXES'));
    expect(valueOf(sink, 'SHOAL_INDEXES')).toBe(valueOf(container, 'SHOAL_INDEXES'));
    // No models of its own: the encoders are the pools'.
    expect(envOf(container).has('SHOAL_MODELS')).toBe(false);
    // Metrics port and probes exactly as the worker pools have them.
    expect(container?.ports).toEqual(worker?.ports);
    expect([container?.startupProbe, container?.readinessProbe, container?.livenessProbe]).toEqual([worker?.startupProbe, worker?.readinessProbe, worker?.livenessProbe]);
    expect((pod.terminationGracePeriodSeconds ?? 0) * 1000).toBeGreaterThan(Number(valueOf(container, 'SHOAL_DRAIN_TIMEOUT_MS')) + 10_000);
    // Every variable is one Shoal reads, but those of the role being built beside the chart.
    const known = envVariablesShoalReads();
    expect((container?.env ?? []).map((e) => e.name).filter((n) => !known.has(n))).toEqual([]);
    // A headless metrics Service for the ServiceMonitor.
    const service = find<{ spec: { clusterIP: string; ports: unknown[] } }>(result, 'Service', 'shoal-documents-metrics');
    expect(service.spec).toMatchObject({ clusterIP: 'None', ports: [{ name: 'metrics', port: 9464, targetPort: 'metrics' }] });
  });

  it('renders nothing for document workers by default, and no SHOAL_INDEXES without indexes', () => {
    const defaults = renderChart([]);
    if (isFailure(defaults)) throw new Error(defaults.stderr);
    expect(defaults.manifests.filter((m) => m.metadata.name.includes('documents')).map((m) => `${m.kind}/${m.metadata.name}`)).toEqual([]);
    expect(defaults.text).not.toContain('SHOAL_INDEXES');
    // The documents NATS user exists anyway, so turning the role on later needs no new Secret.
    const auth = defaults.manifests.find((m) => m.metadata.name === 'shoal-nats-authorization') as unknown as { stringData: Record<string, string> };
    expect(auth.stringData['shoal-authorization.conf']).toMatch(/user: "documents"\n\s+password: "[A-Za-z0-9]{32}"\n/);
  });

  it('refuses pipelines, drain and scale-to-zero values it cannot serve, saying what to change', () => {
    const refused = (values: unknown): string => {
      const rendered = renderChart([overlay, write('refused.yaml', values)]);
      return isFailure(rendered) ? rendered.stderr : '';
    };
    expect(refused({ documents: { pipelines: ['a.b'] } })).toMatch(/documents.pipelines: "a.b" must be 1-64 characters of A-Z a-z 0-9 _ -/);
    expect(refused({ documents: { pipelines: ['x', 'x'] } })).toMatch(/documents.pipelines lists a pipeline twice/);
    expect(refused({ documents: { pipelines: [] } })).toMatch(/documents.pipelines is empty/);
    expect(refused({ documents: { drainTimeoutMs: 60000, terminationGracePeriodSeconds: 60 } })).toMatch(/documents: terminationGracePeriodSeconds \(60\) must exceed drainTimeoutMs\/1000 \+ 10 \(70\)/);
    expect(refused({ documents: { keda: { enabled: false } } })).toMatch(/documents: replicas.min 0 needs KEDA/);
    // Without KEDA and with a minimum of 1, a fixed replica count and no ScaledObject or bootstrap Job.
    const fixed = renderChart([overlay, write('fixed.yaml', { documents: { keda: { enabled: false }, replicas: { min: 1, max: 1 } } })]);
    if (isFailure(fixed)) throw new Error(fixed.stderr);
    expect(find<Workload>(fixed, 'Deployment', 'shoal-documents').spec.replicas).toBe(1);
    expect(fixed.manifests.filter((m) => ['ScaledObject', 'Job', 'PodDisruptionBudget'].includes(m.kind) && m.metadata.name.includes('documents'))).toEqual([]);
  });

  it.skipIf(KUBECTL === null)('the documents render is parsed and mapped by kubectl (client-side dry run)', async () => {
    const file = join(dir, 'documents-manifests.yaml');
    writeFileSync(file, result.text);
    const run = await promisify(execFile)(KUBECTL ?? 'kubectl', ['apply', '--dry-run=client', '--validate=false', '-n', 'shoal', '--server', kube?.url ?? '', '-f', file, '-o', 'name'], { timeout: 30_000 });
    expect(run.stderr).toBe('');
    const objects = run.stdout.trim().split('\n');
    expect(objects.length).toBe(result.manifests.length);
    expect(objects).toEqual(expect.arrayContaining(['scaledobject.keda.sh/shoal-documents', 'deployment.apps/shoal-documents', 'job.batch/shoal-documents-consumers']));
  }, 60_000);
});
