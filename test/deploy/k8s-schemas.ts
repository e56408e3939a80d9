import { z } from 'zod';

/**
 * zod schemas of the Kubernetes and KEDA fields the chart renders. They complement the published
 * schemas (k8s-models.ts: kubernetes-models and @kubernetes-models/keda), which allow unknown
 * fields and do not check names or label syntax: these are strict objects, so a misspelt field
 * fails, and they carry the chart's own rules (non-root, read-only root filesystem, probes, KEDA
 * trigger metadata as strings). For ServiceMonitor and PrometheusRule, which no installed package
 * has a schema for, they are the only schema check.
 */

const DnsName = z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'a DNS-1123 label').max(63);
const Labels = z.record(z.string().regex(/^([a-z0-9.-]+\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/), z.string().max(63));
export const Metadata = z.looseObject({ name: DnsName, labels: Labels.optional(), annotations: z.record(z.string(), z.string()).optional() });

const EnvVar = z.strictObject({
  name: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/),
  value: z.string().optional(),
  valueFrom: z
    .strictObject({
      secretKeyRef: z.strictObject({ name: DnsName, key: z.string() }).optional(),
      fieldRef: z.strictObject({ fieldPath: z.string() }).optional(),
    })
    .optional(),
});
const Probe = z.strictObject({
  httpGet: z.strictObject({ path: z.string().startsWith('/'), port: z.union([z.string(), z.number().int()]) }),
  periodSeconds: z.number().int().positive().optional(),
  failureThreshold: z.number().int().positive().optional(),
});
const Quantity = z.union([z.string().regex(/^[0-9.]+[a-zA-Z]*$/), z.number()]);
export const Container = z.strictObject({
  name: DnsName,
  image: z.string().regex(/^[^\s:]+(:[^\s:]+)?$/),
  imagePullPolicy: z.enum(['Always', 'IfNotPresent', 'Never']),
  command: z.array(z.string()).optional(),
  args: z.array(z.string()).min(1),
  env: z.array(EnvVar),
  ports: z.array(z.strictObject({ name: z.string().max(15), containerPort: z.number().int().min(1).max(65535) })).optional(),
  startupProbe: Probe.optional(),
  readinessProbe: Probe.optional(),
  livenessProbe: Probe.optional(),
  resources: z.strictObject({ requests: z.record(z.string(), Quantity).optional(), limits: z.record(z.string(), Quantity).optional() }).optional(),
  securityContext: z.strictObject({
    allowPrivilegeEscalation: z.literal(false),
    readOnlyRootFilesystem: z.literal(true),
    capabilities: z.strictObject({ drop: z.array(z.literal('ALL')) }),
  }),
  volumeMounts: z.array(z.strictObject({ name: z.string(), mountPath: z.string().startsWith('/'), subPath: z.string().optional(), readOnly: z.boolean().optional() })),
});
const Volume = z.strictObject({
  name: z.string(),
  emptyDir: z.strictObject({ sizeLimit: z.string().optional() }).optional(),
  persistentVolumeClaim: z.strictObject({ claimName: DnsName }).optional(),
  // The document workers' pipeline files (documents.pipelinesConfigMap).
  configMap: z.strictObject({ name: z.string().regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/).max(253) }).optional(),
  // A generic ephemeral volume: a PVC per pod, created and deleted with it.
  ephemeral: z
    .strictObject({
      volumeClaimTemplate: z.strictObject({
        metadata: z.strictObject({ labels: Labels }).optional(),
        spec: z.strictObject({
          accessModes: z.array(z.enum(['ReadWriteOnce', 'ReadWriteOncePod', 'ReadWriteMany'])).min(1),
          storageClassName: DnsName.optional(),
          resources: z.strictObject({ requests: z.strictObject({ storage: z.string() }) }),
        }),
      }),
    })
    .optional(),
});
export const PodSpec = z.strictObject({
  serviceAccountName: DnsName,
  imagePullSecrets: z.array(z.strictObject({ name: z.string() })).optional(),
  securityContext: z.looseObject({ runAsNonRoot: z.literal(true), runAsUser: z.number().int().positive() }),
  terminationGracePeriodSeconds: z.number().int().positive().optional(),
  restartPolicy: z.enum(['Never', 'OnFailure', 'Always']).optional(),
  containers: z.array(Container).min(1),
  volumes: z.array(Volume),
  nodeSelector: z.record(z.string(), z.string()).optional(),
  tolerations: z.array(z.looseObject({ key: z.string().optional(), operator: z.enum(['Exists', 'Equal']), effect: z.string().optional() })).optional(),
  affinity: z.looseObject({}).optional(),
});
const Selector = z.strictObject({ matchLabels: Labels });
export const Deployment = z.strictObject({
  apiVersion: z.literal('apps/v1'),
  kind: z.literal('Deployment'),
  metadata: Metadata,
  spec: z.strictObject({
    replicas: z.number().int().min(0).optional(),
    strategy: z.strictObject({ type: z.enum(['Recreate', 'RollingUpdate']) }).optional(),
    selector: Selector,
    template: z.strictObject({ metadata: z.strictObject({ labels: Labels }), spec: PodSpec }),
  }),
});
export const Job = z.strictObject({
  apiVersion: z.literal('batch/v1'),
  kind: z.literal('Job'),
  metadata: Metadata,
  spec: z.strictObject({
    backoffLimit: z.number().int().min(0),
    activeDeadlineSeconds: z.number().int().positive(),
    template: z.strictObject({ metadata: z.strictObject({ labels: Labels }), spec: PodSpec.extend({ restartPolicy: z.enum(['Never', 'OnFailure']) }) }),
  }),
});
export const Service = z.strictObject({
  apiVersion: z.literal('v1'),
  kind: z.literal('Service'),
  metadata: Metadata,
  spec: z.strictObject({
    type: z.enum(['ClusterIP', 'NodePort', 'LoadBalancer']).optional(),
    clusterIP: z.literal('None').optional(),
    sessionAffinity: z.enum(['ClientIP', 'None']).optional(),
    sessionAffinityConfig: z.strictObject({ clientIP: z.strictObject({ timeoutSeconds: z.number().int().min(1).max(86400) }) }).optional(),
    selector: Labels,
    ports: z.array(z.strictObject({ name: z.string(), port: z.number().int(), targetPort: z.union([z.string(), z.number().int()]) })).min(1),
  }),
});
const KedaString = z.string().min(1);
export const NatsJetStreamTrigger = z.strictObject({
  type: z.literal('nats-jetstream'),
  metadata: z.strictObject({
    natsServerMonitoringEndpoint: z.string().regex(/^[^/:]+:\d+$/, 'host:port without scheme'),
    account: KedaString,
    stream: KedaString,
    consumer: KedaString,
    lagThreshold: z.string().regex(/^\d+$/),
    activationLagThreshold: z.string().regex(/^\d+$/),
  }),
});
export const PrometheusTrigger = z.strictObject({
  type: z.literal('prometheus'),
  metadata: z.strictObject({
    serverAddress: z.string().regex(/^https?:\/\//),
    query: KedaString,
    threshold: z.string().regex(/^\d+(\.\d+)?$/),
    activationThreshold: z.string().regex(/^\d+(\.\d+)?$/),
  }),
});
export const ScaledObject = z.strictObject({
  apiVersion: z.literal('keda.sh/v1alpha1'),
  kind: z.literal('ScaledObject'),
  metadata: Metadata,
  spec: z.strictObject({
    scaleTargetRef: z.strictObject({ name: DnsName }),
    minReplicaCount: z.number().int().min(0),
    maxReplicaCount: z.number().int().min(1),
    pollingInterval: z.number().int().positive(),
    cooldownPeriod: z.number().int().min(0),
    advanced: z.strictObject({
      horizontalPodAutoscalerConfig: z.strictObject({
        behavior: z.strictObject({
          scaleDown: z.strictObject({
            stabilizationWindowSeconds: z.number().int().min(0).max(3600),
            policies: z.array(z.strictObject({ type: z.enum(['Pods', 'Percent']), value: z.number().int().positive(), periodSeconds: z.number().int().positive().max(1800) })),
          }),
        }),
      }),
    }),
    triggers: z.array(z.discriminatedUnion('type', [NatsJetStreamTrigger, PrometheusTrigger])).min(1),
  }),
});
const ScaleTarget = z.strictObject({ apiVersion: z.literal('apps/v1'), kind: z.literal('Deployment'), name: DnsName });
export const Hpa = z.strictObject({
  apiVersion: z.literal('autoscaling/v2'),
  kind: z.literal('HorizontalPodAutoscaler'),
  metadata: Metadata,
  spec: z.strictObject({
    scaleTargetRef: ScaleTarget,
    minReplicas: z.number().int().min(1),
    maxReplicas: z.number().int().min(1),
    metrics: z.array(z.looseObject({ type: z.literal('Resource') })),
  }),
});
export const Pdb = z.strictObject({
  apiVersion: z.literal('policy/v1'),
  kind: z.literal('PodDisruptionBudget'),
  metadata: Metadata,
  spec: z.strictObject({ minAvailable: z.union([z.number(), z.string()]).optional(), maxUnavailable: z.union([z.number(), z.string()]).optional(), selector: Selector }),
});
export const Secret = z.strictObject({
  apiVersion: z.literal('v1'),
  kind: z.literal('Secret'),
  metadata: Metadata,
  type: z.literal('Opaque'),
  data: z.record(z.string(), z.string().regex(/^[A-Za-z0-9+/]+=*$/, 'base64')).optional(),
  stringData: z.record(z.string(), z.string()).optional(),
});
export /** A ServiceMonitor endpoint, with the Prometheus Operator's RelabelConfig fields (camelCase; a snake_case field is refused by its CRD). */
const RelabelConfig = z.strictObject({
  sourceLabels: z.array(z.string().regex(/^[a-zA-Z_][a-zA-Z0-9_]*$/)).optional(),
  separator: z.string().optional(),
  targetLabel: z.string().regex(/^[a-zA-Z_][a-zA-Z0-9_]*$/).optional(),
  regex: z.string().optional(),
  replacement: z.string().optional(),
  action: z.enum(['replace', 'keep', 'drop', 'labelmap', 'labeldrop', 'labelkeep', 'hashmod', 'keepequal', 'dropequal', 'lowercase', 'uppercase']).optional(),
});
const ScrapeEndpoint = z.strictObject({
  port: z.string(),
  path: z.literal('/metrics'),
  interval: z.string().regex(/^[0-9]+(ms|s|m|h)$/).optional(),
  relabelings: z.array(RelabelConfig).optional(),
  metricRelabelings: z.array(RelabelConfig).optional(),
});

const OtherKinds = z.discriminatedUnion('kind', [
  z.looseObject({ apiVersion: z.literal('v1'), kind: z.literal('ServiceAccount'), metadata: Metadata }),
  z.looseObject({ apiVersion: z.literal('v1'), kind: z.literal('PersistentVolumeClaim'), metadata: Metadata, spec: z.looseObject({ resources: z.looseObject({ requests: z.looseObject({ storage: z.string() }) }) }) }),
  z.looseObject({ apiVersion: z.literal('networking.k8s.io/v1'), kind: z.literal('Ingress'), metadata: Metadata, spec: z.looseObject({ rules: z.array(z.looseObject({ host: z.string().min(1) })).min(1) }) }),
  z.looseObject({ apiVersion: z.literal('monitoring.coreos.com/v1'), kind: z.literal('ServiceMonitor'), metadata: Metadata, spec: z.looseObject({ endpoints: z.array(ScrapeEndpoint) }) }),
  z.looseObject({
    apiVersion: z.literal('monitoring.coreos.com/v1'),
    kind: z.literal('PrometheusRule'),
    metadata: Metadata,
    spec: z.looseObject({ groups: z.array(z.looseObject({ name: z.string(), rules: z.array(z.looseObject({ alert: z.string(), expr: z.string() })).min(1) })) }),
  }),
]);

export const SCHEMAS: Record<string, z.ZodType> = {
  Deployment,
  Job,
  Service,
  ScaledObject,
  HorizontalPodAutoscaler: Hpa,
  PodDisruptionBudget: Pdb,
  Secret,
  ServiceAccount: OtherKinds,
  PersistentVolumeClaim: OtherKinds,
  Ingress: OtherKinds,
  ServiceMonitor: OtherKinds,
  PrometheusRule: OtherKinds,
};
