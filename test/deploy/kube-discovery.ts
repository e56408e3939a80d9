import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A stand-in for a Kubernetes API server's discovery endpoints only (/api, /apis, resource lists),
 * so `kubectl apply --dry-run=client --validate=false` can map every rendered object to its
 * resource and parse it without a cluster. GETs of live objects answer 404 (nothing exists yet).
 * It knows exactly the kinds the chart renders; an unknown kind makes kubectl fail, as it should.
 */

const GROUPS: Record<string, Array<[plural: string, kind: string, namespaced: boolean]>> = {
  v1: [
    ['services', 'Service', true],
    ['secrets', 'Secret', true],
    ['serviceaccounts', 'ServiceAccount', true],
    ['persistentvolumeclaims', 'PersistentVolumeClaim', true],
    ['configmaps', 'ConfigMap', true],
    ['namespaces', 'Namespace', false],
  ],
  'apps/v1': [['deployments', 'Deployment', true]],
  'batch/v1': [['jobs', 'Job', true]],
  'policy/v1': [['poddisruptionbudgets', 'PodDisruptionBudget', true]],
  'autoscaling/v2': [['horizontalpodautoscalers', 'HorizontalPodAutoscaler', true]],
  'networking.k8s.io/v1': [['ingresses', 'Ingress', true]],
  'keda.sh/v1alpha1': [['scaledobjects', 'ScaledObject', true]],
  'monitoring.coreos.com/v1': [
    ['servicemonitors', 'ServiceMonitor', true],
    ['prometheusrules', 'PrometheusRule', true],
  ],
};

function resourceList(groupVersion: string): unknown {
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion,
    resources: (GROUPS[groupVersion] ?? []).map(([name, kind, namespaced]) => ({
      name,
      singularName: kind.toLowerCase(),
      kind,
      namespaced,
      verbs: ['create', 'get', 'list', 'patch', 'update', 'delete'],
    })),
  };
}

export interface KubeDiscovery {
  url: string;
  close(): Promise<void>;
}

export async function startKubeDiscovery(): Promise<KubeDiscovery> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const send = (code: number, body: unknown): void => {
      res.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    if (path === '/api') return send(200, { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] });
    if (path === '/api/v1') return send(200, resourceList('v1'));
    if (path === '/apis') {
      const groups = Object.keys(GROUPS)
        .filter((gv) => gv.includes('/'))
        .map((gv) => {
          const [name, version] = gv.split('/');
          return { name, versions: [{ groupVersion: gv, version }], preferredVersion: { groupVersion: gv, version } };
        });
      return send(200, { kind: 'APIGroupList', apiVersion: 'v1', groups });
    }
    const match = /^\/apis\/([^/]+)\/([^/]+)$/.exec(path);
    if (match !== null && GROUPS[`${match[1]}/${match[2]}`] !== undefined) return send(200, resourceList(`${match[1]}/${match[2]}`));
    return send(404, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404, message: `${path} not found` });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
