import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ClusterTriggerAuthentication } from '@kubernetes-models/keda/keda.sh/v1alpha1/ClusterTriggerAuthentication';
import { ScaledJob } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledJob';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import { TriggerAuthentication } from '@kubernetes-models/keda/keda.sh/v1alpha1/TriggerAuthentication';
import { DaemonSet } from 'kubernetes-models/apps/v1/DaemonSet';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { CronJob } from 'kubernetes-models/batch/v1/CronJob';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { PersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { REPO_ROOT } from '../helpers/shared.js';

/**
 * Validation of rendered manifests against the published schemas, through the generated models of
 * two npm packages (devDependencies):
 *
 * - `kubernetes-models` (4.5.1): JSON-schema validators generated from the Kubernetes OpenAPI
 *   spec (its README's badge says 1.27.1, but the schemas it ships are those of Kubernetes 1.33:
 *   `networking.k8s.io/v1` ServiceCIDR and the container lifecycle's `stopSignal` are there, 1.34's
 *   `restartPolicyRules` is not), with Kubernetes' formats (`quantity`, `int-or-string`, `byte`...).
 * - `@kubernetes-models/keda` (0.4.2): validators generated from the CRDs of KEDA 2.10.1
 *   (`keda.sh/v1alpha1`: ScaledObject, ScaledJob, TriggerAuthentication,
 *   ClusterTriggerAuthentication).
 *
 * Each manifest is mapped by apiVersion + kind to its model class; the key is taken from the
 * class itself (`Deployment.apiVersion`, `Deployment.kind`), so a manifest with an apiVersion the
 * package does not define for that kind (e.g. `policy/v1beta1`) has no validator. A kind with no
 * validator fails, unless it is on {@link WITHOUT_PUBLISHED_SCHEMA}, the documented allow-list of
 * kinds neither package covers (checked by the zod schemas of k8s-schemas.ts instead).
 *
 * What these schemas do not check: unknown fields (the Kubernetes OpenAPI spec and KEDA's CRD
 * schemas do not forbid additional properties; an API server drops or, with strict field
 * validation, rejects them), names and label syntax (the API server's validation code, not the
 * schema), and cross-field rules. The zod schemas of k8s-schemas.ts stay for those, for the fields
 * the chart uses.
 */

export const SCHEMA_PACKAGES = {
  'kubernetes-models': '4.5.1',
  '@kubernetes-models/keda': '0.4.2',
} as const;

/** The installed version of a schema package (read from node_modules). */
export function installedVersion(name: keyof typeof SCHEMA_PACKAGES): string {
  return (JSON.parse(readFileSync(join(REPO_ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
}

interface ModelClass {
  readonly apiVersion: string;
  readonly kind: string;
  new (data: never): { validate(): void };
}

const KUBERNETES_MODELS: readonly ModelClass[] = [
  Deployment,
  StatefulSet,
  DaemonSet,
  Job,
  CronJob,
  Service,
  Secret,
  ConfigMap,
  ServiceAccount,
  PersistentVolumeClaim,
  HorizontalPodAutoscaler,
  PodDisruptionBudget,
  Ingress,
  NetworkPolicy,
  Role,
  RoleBinding,
];
const KEDA_MODELS: readonly ModelClass[] = [ScaledObject, ScaledJob, TriggerAuthentication, ClusterTriggerAuthentication];

const typeKey = (apiVersion: string, kind: string): string => `${apiVersion} ${kind}`;

/** apiVersion + kind → model class and the package it comes from. */
export const VALIDATORS: ReadonlyMap<string, { model: ModelClass; source: string }> = new Map<string, { model: ModelClass; source: string }>([
  ...KUBERNETES_MODELS.map((model): [string, { model: ModelClass; source: string }] => [typeKey(model.apiVersion, model.kind), { model, source: `kubernetes-models@${SCHEMA_PACKAGES['kubernetes-models']}` }]),
  ...KEDA_MODELS.map((model): [string, { model: ModelClass; source: string }] => [typeKey(model.apiVersion, model.kind), { model, source: `@kubernetes-models/keda@${SCHEMA_PACKAGES['@kubernetes-models/keda']}` }]),
]);

/**
 * The allow-list: kinds the chart may render that no installed package has a schema for, and
 * why. They are checked only by the zod schemas of k8s-schemas.ts (the fields the chart uses).
 * A kind is added here only with a reason; everything else without a validator fails.
 */
export const WITHOUT_PUBLISHED_SCHEMA: ReadonlyMap<string, string> = new Map([
  [
    typeKey('monitoring.coreos.com/v1', 'ServiceMonitor'),
    'Prometheus Operator CRD: neither kubernetes-models nor @kubernetes-models/keda ships it (@kubernetes-models/prometheus-operator would; not installed); checked by the zod schema in k8s-schemas.ts',
  ],
  [
    typeKey('monitoring.coreos.com/v1', 'PrometheusRule'),
    'Prometheus Operator CRD: neither kubernetes-models nor @kubernetes-models/keda ships it (@kubernetes-models/prometheus-operator would; not installed); checked by the zod schema in k8s-schemas.ts',
  ],
]);

export type SchemaCheck =
  | { outcome: 'valid'; source: string }
  | { outcome: 'invalid'; source: string; errors: string[] }
  | { outcome: 'allow-listed'; reason: string }
  | { outcome: 'no-validator' };

function describeError(error: unknown): string[] {
  const details = (error as { errors?: unknown } | null)?.errors;
  if (Array.isArray(details) && details.length > 0) {
    return details.map((e: { instancePath?: string; message?: string; params?: unknown }) => `${e.instancePath === '' || e.instancePath === undefined ? '/' : e.instancePath}: ${e.message ?? 'invalid'} ${JSON.stringify(e.params ?? {})}`);
  }
  return [error instanceof Error ? error.message : String(error)];
}

/** Validates one manifest against the published schema of its apiVersion + kind. */
export function checkManifest(manifest: { apiVersion?: unknown; kind?: unknown }): SchemaCheck {
  const key = typeKey(String(manifest.apiVersion), String(manifest.kind));
  const validator = VALIDATORS.get(key);
  if (validator === undefined) {
    const reason = WITHOUT_PUBLISHED_SCHEMA.get(key);
    return reason === undefined ? { outcome: 'no-validator' } : { outcome: 'allow-listed', reason };
  }
  try {
    // The model copies the object (apiVersion and kind included) and validates the copy.
    new validator.model(manifest as never).validate();
    return { outcome: 'valid', source: validator.source };
  } catch (error) {
    return { outcome: 'invalid', source: validator.source, errors: describeError(error) };
  }
}

/** One line per manifest that fails its schema or has neither a validator nor an allow-list entry. */
export function schemaProblems(manifests: ReadonlyArray<{ apiVersion?: unknown; kind?: unknown; metadata?: { name?: unknown } }>): string[] {
  const problems: string[] = [];
  for (const manifest of manifests) {
    const what = `${String(manifest.apiVersion)} ${String(manifest.kind)} ${String(manifest.metadata?.name)}`;
    const check = checkManifest(manifest);
    if (check.outcome === 'invalid') problems.push(`${what}: invalid against ${check.source}: ${check.errors.join('; ')}`);
    if (check.outcome === 'no-validator') {
      problems.push(`${what}: no schema validator for this apiVersion and kind, and not on the allow-list (add its model class to VALIDATORS in test/deploy/k8s-models.ts, or, for a kind no package covers, a reason to WITHOUT_PUBLISHED_SCHEMA and docs/deploy.md)`);
    }
  }
  return problems;
}
