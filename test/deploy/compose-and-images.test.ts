import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import picomatch from 'picomatch';
import { parse } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DEFAULT_GATEWAY_PORT } from '../../services/gateway/defaults.js';
import { DASHBOARDS, dashboardJson, DASHBOARD_DIR } from '../../deploy/tools/grafana-dashboards.js';
import {
  ALERTS_FILE,
  CHART_ALERTS_FILE,
  CHART_PERMISSIONS_FILE,
  COMPONENTS,
  COMPOSE_NATS_CONF,
  PERMISSIONS_FILE,
  composeNatsConf,
  loadPermissions,
  passwordVariable,
} from '../../deploy/tools/nats-config.js';
import { REPO_ROOT } from '../helpers/shared.js';
import { runShoal } from '../helpers/shoal-cli.js';
import { envVariablesShoalReads } from './shoal-env.js';

/**
 * docker-compose.yml, the Dockerfiles and the generated deployment files, checked against the code
 * without a Docker engine: compose services run commands `shoal --help` lists with variables
 * Shoal reads, on the ports its defaults and flags give, with health checks on its probe routes
 * and the NATS users of the permission file; every COPY source of the images exists and passes
 * .dockerignore, every COPY --from names a stage that produces it, the entry point is the file
 * the build produces, and the runtime user is not root.
 */

const Healthcheck = z.looseObject({ test: z.array(z.string()).min(2) });
const ComposeService = z.looseObject({
  image: z.string().optional(),
  build: z.looseObject({ context: z.string(), dockerfile: z.string() }).optional(),
  command: z.array(z.string()).optional(),
  environment: z.record(z.string(), z.union([z.string(), z.number()])).optional(),
  ports: z.array(z.string()).optional(),
  volumes: z.array(z.string()).optional(),
  healthcheck: Healthcheck.optional(),
  read_only: z.boolean().optional(),
  tmpfs: z.array(z.string()).optional(),
  depends_on: z.record(z.string(), z.looseObject({ condition: z.string() })).optional(),
  stop_grace_period: z.string().optional(),
});
const Compose = z.looseObject({ services: z.record(z.string(), ComposeService), volumes: z.record(z.string(), z.unknown().nullable()) });
type ComposeService = z.infer<typeof ComposeService>;

const compose = Compose.parse(parse(readFileSync(join(REPO_ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }));
const SHOAL_SERVICES = Object.entries(compose.services).filter(([, s]) => s.build?.dockerfile === 'deploy/docker/Dockerfile');

/** `${VAR:-default}` → default (what compose uses when .env does not set VAR). */
function interpolate(value: string | number): string {
  return String(value).replace(/\$\{([A-Z0-9_]+):-([^}]*)\}/g, (_m, _name: string, fallback: string) => fallback);
}
function env(service: ComposeService, name: string): string | undefined {
  const value = service.environment?.[name];
  return value === undefined ? undefined : interpolate(value);
}
/** The URL a `node -e fetch(...)` or wget health check requests. */
function healthUrl(service: ComposeService): URL | null {
  const text = service.healthcheck?.test.join(' ') ?? '';
  const match = /https?:\/\/[^'"\s)]+/.exec(text);
  return match === null ? null : new URL(match[0]);
}

describe('docker-compose.yml against the code', () => {
  let topHelp = '';
  const commandHelp = new Map<string, string>();

  beforeAll(async () => {
    topHelp = (await runShoal(['--help'])).stdout;
    for (const [, service] of SHOAL_SERVICES) {
      const role = service.command?.[0] ?? '';
      if (!commandHelp.has(role)) commandHelp.set(role, (await runShoal([role, '--help'])).stdout);
    }
  }, 60_000);

  it('has the whole system: NATS, MinIO and its bucket, gateway, two worker pools, sink, Prometheus, Grafana', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['gateway', 'grafana', 'minio', 'minio-init', 'nats', 'prometheus', 'sink', 'worker-text', 'worker-vision']);
    expect(SHOAL_SERVICES.map(([name]) => name).sort()).toEqual(['gateway', 'sink', 'worker-text', 'worker-vision']);
    expect(compose.services['minio-init']?.command?.join(' ')).toMatch(/mc mb --ignore-existing local\//);
  });

  it('runs commands `shoal --help` lists, with flags the command accepts', () => {
    for (const [name, service] of SHOAL_SERVICES) {
      const [role, ...flags] = service.command ?? [];
      expect(topHelp, name).toMatch(new RegExp(`^  ${role} `, 'm'));
      for (const flag of flags.filter((f) => f.startsWith('--'))) expect(commandHelp.get(role ?? ''), `${name} ${flag}`).toContain(flag);
    }
  });

  it('sets only environment variables Shoal reads', () => {
    const known = envVariablesShoalReads();
    for (const [name, service] of SHOAL_SERVICES) {
      const unknown = Object.keys(service.environment ?? {}).filter((v) => !known.has(v));
      expect(unknown, name).toEqual([]);
    }
  });

  it('publishes and scrapes the ports the code listens on, and health-checks its probe routes', () => {
    const gateway = compose.services.gateway;
    if (gateway === undefined) throw new Error('no gateway');
    expect(Number(env(gateway, 'SHOAL_PORT'))).toBe(DEFAULT_GATEWAY_PORT);
    expect(gateway.ports).toContain(`${DEFAULT_GATEWAY_PORT}:${DEFAULT_GATEWAY_PORT}`);
    expect(healthUrl(gateway)?.port).toBe(String(DEFAULT_GATEWAY_PORT));
    expect(healthUrl(gateway)?.pathname).toBe('/readyz');
    const prometheus = parse(readFileSync(join(REPO_ROOT, 'deploy', 'prometheus', 'prometheus.yml'), 'utf8')) as { scrape_configs: Array<{ static_configs: Array<{ targets: string[] }> }> };
    const targets = prometheus.scrape_configs.flatMap((c) => c.static_configs.flatMap((s) => s.targets));
    expect(targets).toContain(`gateway:${DEFAULT_GATEWAY_PORT}`);
    for (const pool of ['worker-text', 'worker-vision']) {
      const worker = compose.services[pool];
      if (worker === undefined) throw new Error(pool);
      const port = env(worker, 'SHOAL_METRICS_PORT');
      expect(port).toBe('9464');
      expect(env(worker, 'SHOAL_METRICS_HOST')).toBe('0.0.0.0');
      expect(healthUrl(worker)?.port).toBe(port);
      expect(healthUrl(worker)?.pathname).toBe('/readyz');
      expect(targets).toContain(`${pool}:${port}`);
      expect(env(worker, 'SHOAL_MODELS')?.split(',').length).toBeGreaterThanOrEqual(1);
      // The drain fits in the time compose gives a stopping container.
      expect(Number.parseInt(worker.stop_grace_period ?? '10s', 10) * 1000).toBeGreaterThan(Number(env(worker, 'SHOAL_DRAIN_TIMEOUT_MS')));
    }
    // The sink's metrics port (loopback by default) opened to Prometheus, health-checked on /readyz.
    const sink = compose.services.sink;
    if (sink === undefined) throw new Error('no sink');
    expect(env(sink, 'SHOAL_METRICS_HOST')).toBe('0.0.0.0');
    expect(healthUrl(sink)?.port).toBe(env(sink, 'SHOAL_METRICS_PORT'));
    expect(healthUrl(sink)?.pathname).toBe('/readyz');
    expect(targets).toContain(`sink:${env(sink, 'SHOAL_METRICS_PORT') ?? ''}`);
    const routes = readFileSync(join(REPO_ROOT, 'services', 'gateway', 'routes', 'health.ts'), 'utf8') + readFileSync(join(REPO_ROOT, 'adapters', 'observability', 'metrics-server.ts'), 'utf8');
    expect(routes).toContain("'/readyz'");
  });

  it('logs every component in as its own least-privilege NATS user, with the password the server expects', () => {
    const nats = compose.services.nats;
    if (nats === undefined) throw new Error('no nats');
    expect(nats.volumes).toContain('./deploy/nats/nats.conf:/etc/nats/nats.conf:ro');
    const users = new Map<string, string>();
    for (const [name, service] of SHOAL_SERVICES) {
      const user = env(service, 'NATS_USER') ?? '';
      expect(COMPONENTS as readonly string[], name).toContain(user);
      users.set(name, user);
      const passwordRef = String(service.environment?.NATS_PASSWORD ?? '');
      const variable = passwordVariable(user as (typeof COMPONENTS)[number]);
      expect(passwordRef.startsWith(`\${${variable}:-`), name).toBe(true);
      expect(interpolate(String(nats.environment?.[variable] ?? '')), name).toBe(interpolate(passwordRef));
      expect(env(service, 'NATS_URL')).toBe('nats://nats:4222');
    }
    expect([...users.values()].sort()).toEqual(['gateway', 'sink', 'worker', 'worker']);
    // nats-server refuses a configuration naming a variable it cannot find: the nats service
    // gets the password of every user nats.conf declares, those no compose service logs in as too.
    const referenced = [...readFileSync(COMPOSE_NATS_CONF, 'utf8').matchAll(/password: \$([A-Z0-9_]+)/g)].map((m) => m[1]);
    expect(referenced).toEqual(COMPONENTS.map((c) => passwordVariable(c)));
    for (const variable of referenced) expect(interpolate(String(nats.environment?.[variable ?? ''] ?? '')), variable).not.toBe('');
  });

  it('runs read-only with writable caches, results and /tmp only', () => {
    for (const [name, service] of SHOAL_SERVICES) {
      expect(service.read_only, name).toBe(true);
      expect(service.tmpfs, name).toContain('/tmp');
      const mounts = (service.volumes ?? []).map((v) => interpolate(v).split(':')[1]);
      for (const variable of ['SHOAL_CACHE_DIR', 'HF_HOME', 'SHOAL_RESULTS_DIR']) {
        const dir = env(service, variable);
        if (dir !== undefined) expect(mounts, `${name} ${variable}`).toContain(dir);
      }
    }
    const declared = new Set(Object.keys(compose.volumes));
    for (const [name, service] of Object.entries(compose.services)) {
      for (const volume of service.volumes ?? []) {
        const source = interpolate(volume).split(':')[0] ?? '';
        if (source.startsWith('./')) {
          if (!source.startsWith('./models')) expect(existsSync(join(REPO_ROOT, source)), `${name}: ${source}`).toBe(true);
        } else expect(declared.has(source), `${name}: volume ${source}`).toBe(true);
      }
    }
  });

  it('provisions Grafana with the Prometheus service and the dashboards folder it mounts', () => {
    const grafana = compose.services.grafana;
    expect(grafana?.volumes).toContain('./deploy/grafana/dashboards:/var/lib/grafana/dashboards:ro');
    const datasource = parse(readFileSync(join(REPO_ROOT, 'deploy/grafana/provisioning/datasources/prometheus.yaml'), 'utf8')) as { datasources: Array<{ url: string }> };
    expect(datasource.datasources[0]?.url).toBe('http://prometheus:9090');
    expect(compose.services.prometheus?.ports).toContain('9090:9090');
    const provider = parse(readFileSync(join(REPO_ROOT, 'deploy/grafana/provisioning/dashboards/shoal.yaml'), 'utf8')) as { providers: Array<{ options: { path: string } }> };
    expect(provider.providers[0]?.options.path).toBe('/var/lib/grafana/dashboards');
  });
});

describe('generated files are current', () => {
  it('deploy/nats/nats.conf and the chart copies match their sources', () => {
    expect(readFileSync(COMPOSE_NATS_CONF, 'utf8')).toBe(composeNatsConf(loadPermissions()));
    expect(readFileSync(CHART_PERMISSIONS_FILE, 'utf8')).toBe(readFileSync(PERMISSIONS_FILE, 'utf8'));
    expect(readFileSync(CHART_ALERTS_FILE, 'utf8')).toBe(readFileSync(ALERTS_FILE, 'utf8'));
  });

  it('the Grafana dashboards match deploy/tools/grafana-dashboards.ts (six: throughput, latency, batching, models, backlog, errors)', () => {
    expect(DASHBOARDS.map((d) => d.uid)).toEqual(['shoal-throughput', 'shoal-latency', 'shoal-batching', 'shoal-models', 'shoal-backlog', 'shoal-errors']);
    for (const dashboard of DASHBOARDS) expect(readFileSync(join(DASHBOARD_DIR, `${dashboard.uid}.json`), 'utf8')).toBe(dashboardJson(dashboard));
  });
});

interface Instruction {
  op: string;
  args: string;
}

/** Dockerfile instructions, continuation lines joined, comments dropped. */
function instructions(file: string): Instruction[] {
  const joined = readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('#'))
    .join('\n')
    .replace(/\\\n/g, ' ');
  return joined
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .map((line) => {
      const [op = '', ...rest] = line.split(/\s+/);
      return { op: op.toUpperCase(), args: rest.join(' ') };
    });
}

function stages(list: readonly Instruction[]): Array<{ name: string; base: string; body: Instruction[] }> {
  const out: Array<{ name: string; base: string; body: Instruction[] }> = [];
  for (const ins of list) {
    if (ins.op === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(ins.args);
      out.push({ base: m?.[1] ?? '', name: m?.[2] ?? String(out.length), body: [] });
    } else out[out.length - 1]?.body.push(ins);
  }
  return out;
}

/** Whether .dockerignore lets `path` into the build context (last matching pattern wins). */
function inContext(path: string): boolean {
  const patterns = readFileSync(join(REPO_ROOT, '.dockerignore'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  let included = true;
  for (const pattern of patterns) {
    const negated = pattern.startsWith('!');
    const glob = negated ? pattern.slice(1) : pattern;
    if (picomatch(glob, { dot: true })(path) || picomatch(`${glob}/**`, { dot: true })(path)) included = negated;
  }
  return included;
}

describe.each(['Dockerfile', 'Dockerfile.cuda'])('deploy/docker/%s', (name) => {
  const file = join(REPO_ROOT, 'deploy', 'docker', name);
  const list = instructions(file);
  const all = stages(list);
  const final = all[all.length - 1];

  it('copies only sources that exist and pass .dockerignore', () => {
    const copies = list.filter((i) => i.op === 'COPY' && !i.args.includes('--from='));
    expect(copies.length).toBeGreaterThanOrEqual(6);
    for (const copy of copies) {
      const parts = copy.args.split(/\s+/).filter((p) => !p.startsWith('--'));
      for (const source of parts.slice(0, -1)) {
        expect(existsSync(join(REPO_ROOT, source)), source).toBe(true);
        const probe = source.endsWith('.json') || source.includes('.') ? source : `${source}/index.ts`;
        expect(inContext(source === 'bin' ? 'bin/shoal.js' : probe), `${source} excluded by .dockerignore`).toBe(true);
      }
    }
    expect(inContext('node_modules/zod/package.json')).toBe(false);
    expect(inContext('test/fixtures/models/tiny-bert-mean/model.onnx')).toBe(false);
  });

  it('builds dist/ and the malloc_trim addon in a stage with a compiler, and copies them from there', () => {
    const build = all.find((s) => s.name === 'build');
    expect(build?.base).toMatch(/^node:\$\{NODE_VERSION\}-bookworm$/); // the full image: gcc, make, Node's headers
    const runs = build?.body.filter((i) => i.op === 'RUN').map((i) => i.args).join('\n') ?? '';
    expect(runs).toContain('npm ci');
    expect(runs).toContain('test -f native/build/malloc-trim.node');
    expect(runs).toContain('node node_modules/tsgo/bin/tsc -p tsconfig.build.json');
    expect(runs).toContain('test -f dist/services/cli/main.js');
    const tsconfig = JSON.parse(readFileSync(join(REPO_ROOT, 'tsconfig.json'), 'utf8')) as { compilerOptions: { outDir: string } };
    expect(tsconfig.compilerOptions.outDir).toBe('dist');
    const fromCopies = final?.body.filter((i) => i.op === 'COPY' && i.args.includes('--from=')) ?? [];
    const stageNames = new Set(all.map((s) => s.name));
    for (const copy of fromCopies) expect(stageNames.has(/--from=(\S+)/.exec(copy.args)?.[1] ?? ''), copy.args).toBe(true);
    const copied = fromCopies.map((c) => c.args.split(/\s+/)[1]);
    expect(copied).toEqual(expect.arrayContaining(['/app/dist', '/app/node_modules', '/app/bin', '/app/native/build', '/app/package.json']));
    expect(final?.body.some((i) => i.op === 'RUN' && /apt-get|gcc|build-essential/.test(i.args))).toBe(false);
  });

  it('runs bin/shoal.js (which loads the compiled CLI) as a non-root user, any role', () => {
    const entry = final?.body.filter((i) => i.op === 'ENTRYPOINT').at(-1);
    expect(entry?.args).toBe('["node", "/app/bin/shoal.js"]');
    expect(readFileSync(join(REPO_ROOT, 'bin', 'shoal.js'), 'utf8')).toContain("'dist/services/cli/main.js'");
    const user = final?.body.filter((i) => i.op === 'USER').at(-1)?.args ?? '';
    expect(user).toMatch(/^\d+(:\d+)?$/);
    expect(Number(user.split(':')[0])).toBeGreaterThan(0);
  });

  it('keeps writable state in volumes so the root filesystem can be read-only', () => {
    const envs = final?.body.filter((i) => i.op === 'ENV').map((i) => i.args).join(' ') ?? '';
    const cache = /SHOAL_CACHE_DIR=(\S+)/.exec(envs)?.[1];
    const hf = /HF_HOME=(\S+)/.exec(envs)?.[1];
    const volumes = final?.body.find((i) => i.op === 'VOLUME')?.args ?? '';
    expect(cache).toBeDefined();
    expect(volumes).toContain(`"${cache}"`);
    expect(volumes).toContain(`"${hf}"`);
  });

  it('sets onnxruntime-node install mode to a value its postinstall accepts', () => {
    const mode = /ONNXRUNTIME_NODE_INSTALL=(\S+)/.exec(list.filter((i) => i.op === 'ENV').map((i) => i.args).join(' '))?.[1];
    const metadata = readFileSync(join(REPO_ROOT, 'node_modules', 'onnxruntime-node', 'script', 'install-metadata.js'), 'utf8');
    if (name === 'Dockerfile') expect(mode).toBe('skip');
    else {
      expect(mode).toBe('cuda12');
      expect(metadata).toMatch(/'linux\/x64': \['cuda12'\]/);
      expect(list.map((i) => i.args).join('\n')).toContain('libonnxruntime_providers_cuda.so');
    }
  });
});
