import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { z } from 'zod';
import { writeGenerated } from './generated-files.js';

/**
 * Renders deploy/nats/permissions.yaml (the one list of what each Shoal component may do on NATS)
 * into a nats-server configuration for docker compose (deploy/nats/nats.conf) and copies it into
 * the Helm chart (files/nats-permissions.yaml), with the alert rules (files/shoal-alerts.yaml: a chart
 * cannot read files outside its folder). Run after editing either source:
 *   npx tsx deploy/tools/nats-config.ts          # writes both files
 *   npx tsx deploy/tools/nats-config.ts --check  # exit 1 when they are stale (the tests do the same)
 */

export const DEPLOY_DIR = join(dirname(fileURLToPath(import.meta.url)), '..');
export const PERMISSIONS_FILE = join(DEPLOY_DIR, 'nats', 'permissions.yaml');
export const COMPOSE_NATS_CONF = join(DEPLOY_DIR, 'nats', 'nats.conf');
export const CHART_PERMISSIONS_FILE = join(DEPLOY_DIR, 'helm', 'shoal', 'files', 'nats-permissions.yaml');
export const ALERTS_FILE = join(DEPLOY_DIR, 'grafana', 'alerts', 'shoal-alerts.yaml');
export const CHART_ALERTS_FILE = join(DEPLOY_DIR, 'helm', 'shoal', 'files', 'shoal-alerts.yaml');
export const COMPONENTS = ['gateway', 'worker', 'sink', 'documents', 'classify'] as const;
export type Component = (typeof COMPONENTS)[number];

const Subjects = z.array(z.string().min(1)).default([]);
const Rules = z.strictObject({ publish: Subjects, subscribe: Subjects, deny_publish: Subjects, allow_responses: z.boolean().default(false) });
export const PermissionsFile = z.strictObject({
  common: Rules,
  components: z.strictObject({ gateway: Rules, worker: Rules, sink: Rules, documents: Rules, classify: Rules }),
});
export type PermissionsFile = z.output<typeof PermissionsFile>;

export interface ComponentPermissions {
  publish: string[];
  subscribe: string[];
  denyPublish: string[];
  allowResponses: boolean;
}

export function loadPermissions(file: string = PERMISSIONS_FILE): PermissionsFile {
  return PermissionsFile.parse(parse(readFileSync(file, 'utf8')));
}

/** Fills {prefix}, {PREFIX} and {lower} as natsNames() derives names from a prefix. */
export function expandSubject(subject: string, prefix: string): string {
  const upper = prefix.replace(/[.-]/g, '_').toUpperCase();
  const lower = prefix.replace(/[.-]/g, '_').toLowerCase();
  return subject.replaceAll('{prefix}', prefix).replaceAll('{PREFIX}', upper).replaceAll('{lower}', lower);
}

export function componentPermissions(file: PermissionsFile, component: Component, prefix: string): ComponentPermissions {
  const own = file.components[component];
  const expand = (list: readonly string[]): string[] => [...new Set(list.map((s) => expandSubject(s, prefix)))];
  return {
    publish: expand([...file.common.publish, ...own.publish]),
    subscribe: expand([...file.common.subscribe, ...own.subscribe]),
    denyPublish: expand([...file.common.deny_publish, ...own.deny_publish]),
    allowResponses: own.allow_responses || file.common.allow_responses,
  };
}

const quote = (s: string): string => JSON.stringify(s);

/** The `authorization { users = [...] }` block; passwords are nats-server `$VARIABLE` references. */
export function authorizationBlock(file: PermissionsFile, prefix: string, passwordVariable: (c: Component) => string): string {
  const users = COMPONENTS.map((component) => {
    const p = componentPermissions(file, component, prefix);
    return [
      '    {',
      `      user: ${quote(component)}`,
      `      password: $${passwordVariable(component)}`,
      '      permissions: {',
      `        publish: { allow: [${p.publish.map(quote).join(', ')}], deny: [${p.denyPublish.map(quote).join(', ')}] }`,
      `        subscribe: { allow: [${p.subscribe.map(quote).join(', ')}] }`,
      ...(p.allowResponses ? ['        allow_responses: true'] : []),
      '      }',
      '    }',
    ].join('\n');
  });
  return `authorization {\n  users = [\n${users.join('\n')}\n  ]\n}\n`;
}

export const passwordVariable = (component: Component): string => `SHOAL_NATS_${component.toUpperCase()}_PASSWORD`;

/**
 * JetStream file store of the compose server, in GiB (nats-server reads `GB` as 1024^3 bytes).
 * A stream with `max_bytes` reserves that much of the server's store when it is created, and
 * Shoal sizes SHOAL_JOBS, SHOAL_RESULTS and SHOAL_INGEST from the free store: a quarter each, at
 * most 8 GiB (adapters/nats/connection/stream-sizing.ts). 40 GiB holds four times 8 GiB, so each gets its
 * full size (24 GiB), and the rest is for what reserves nothing: the status buckets, the object
 * store (payloads, ingest documents), dead letters.
 * test/deploy/nats-permissions.test.ts checks it against the code's sizes on a real server.
 */
export const COMPOSE_MAX_FILE_STORE_GIB = 40;

/** The compose nats-server configuration: JetStream, monitoring on 8222, the users of COMPONENTS. */
export function composeNatsConf(file: PermissionsFile, prefix = 'shoal'): string {
  return [
    '# Generated by deploy/tools/nats-config.ts from deploy/nats/permissions.yaml: edit that file, then re-run the tool.',
    '# Passwords come from the environment of the nats container (see docker-compose.yml).',
    'port: 4222',
    'http_port: 8222',
    'max_payload: 1MB',
    'jetstream {',
    '  store_dir: /data/jetstream',
    `  max_file_store: ${COMPOSE_MAX_FILE_STORE_GIB}GB`,
    '}',
    authorizationBlock(file, prefix, passwordVariable),
  ].join('\n');
}

function main(): number {
  const check = process.argv.includes('--check');
  const source = readFileSync(PERMISSIONS_FILE, 'utf8');
  const outputs: Array<[string, string]> = [
    [COMPOSE_NATS_CONF, composeNatsConf(loadPermissions())],
    [CHART_PERMISSIONS_FILE, source],
    [CHART_ALERTS_FILE, readFileSync(ALERTS_FILE, 'utf8')],
  ];
  return writeGenerated(outputs, check, 'run npx tsx deploy/tools/nats-config.ts');
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) process.exitCode = main();
