import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { FREE_STORE_SHARES, STREAM_BYTES_CEILING } from '../../adapters/nats/connection/stream-sizing.js';
import { COMPONENTS } from '../../deploy/tools/nats-config.js';
import { REPO_ROOT } from '../helpers/shared.js';

/**
 * deploy/terraform without providers (no downloads here): `terraform fmt -check` parses every file
 * as HCL (a syntax error fails it, shown by a broken copy) and finds it formatted; then the blocks
 * are read for what the module promises: documented variables, the required ones (no default), the
 * outputs the Helm release and operators need, a GPU spot node group that scales to zero, and an
 * example that wires the module with every required variable.
 */

const TERRAFORM = ['/usr/bin/terraform', '/usr/local/bin/terraform'].find((p) => existsSync(p)) ?? null;
const DIR = join(REPO_ROOT, 'deploy', 'terraform');
const MODULE = join(DIR, 'modules', 'eks-shoal');

interface Block {
  kind: string;
  labels: string[];
  body: string;
}

/** Top-level blocks `kind "label" ... {` with their bodies (braces matched, strings skipped). */
function blocks(text: string): Block[] {
  const out: Block[] = [];
  const header = /^([a-z_]+)((?:\s+"[^"]*")*)\s*\{/gm;
  for (let m = header.exec(text); m !== null; m = header.exec(text)) {
    let depth = 1;
    let i = header.lastIndex;
    let inString = false;
    for (; i < text.length && depth > 0; i++) {
      const c = text[i];
      if (inString) {
        if (c === '\\') i++;
        else if (c === '"') inString = false;
      } else if (c === '"') inString = true;
      else if (c === '{') depth++;
      else if (c === '}') depth--;
    }
    out.push({ kind: m[1] ?? '', labels: [...(m[2] ?? '').matchAll(/"([^"]*)"/g)].map((l) => l[1] ?? ''), body: text.slice(header.lastIndex, i - 1) });
    header.lastIndex = i;
  }
  return out;
}

function moduleBlocks(dir: string): Block[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.tf'))
    .flatMap((f) => blocks(readFileSync(join(dir, f), 'utf8')));
}

const attribute = (body: string, name: string): string | null => new RegExp(`^\\s*${name}\\s*=\\s*(.+)$`, 'm').exec(body)?.[1]?.trim() ?? null;

describe.skipIf(TERRAFORM === null)(`Terraform ${TERRAFORM === null ? 'skipped: terraform not installed' : ''}`, () => {
  it('every file parses as HCL and is formatted (terraform fmt -check -recursive)', () => {
    const run = spawnSync(TERRAFORM ?? 'terraform', ['fmt', '-check', '-recursive', DIR], { encoding: 'utf8' });
    expect(run.stdout).toBe('');
    expect(run.status).toBe(0);
    // The same check refuses a syntax error, so a pass means the files parsed.
    const broken = join(mkdtempSync(join(tmpdir(), 'shoal-tf-')), 'broken.tf');
    writeFileSync(broken, readFileSync(join(MODULE, 'variables.tf'), 'utf8').replace('type        = string', 'type        = '));
    expect(spawnSync(TERRAFORM ?? 'terraform', ['fmt', '-check', broken], { encoding: 'utf8' }).status).not.toBe(0);
  });

  it('documents every variable and output; the required variables are the ones without a default', () => {
    const all = moduleBlocks(MODULE);
    const variables = all.filter((b) => b.kind === 'variable');
    const outputs = all.filter((b) => b.kind === 'output');
    for (const block of [...variables, ...outputs]) expect(attribute(block.body, 'description'), block.labels[0]).toMatch(/^".{10,}"$/);
    for (const variable of variables) expect(attribute(variable.body, 'type'), variable.labels[0]).not.toBeNull();
    const required = variables.filter((v) => attribute(v.body, 'default') === null).map((v) => v.labels[0]);
    expect(required.sort()).toEqual(['name', 'region', 'shoal_chart_path', 'subnet_ids', 'vpc_id']);
    expect(outputs.map((o) => o.labels[0]).sort()).toEqual(['api_token', 'bucket_name', 'cluster_ca_certificate', 'cluster_endpoint', 'cluster_name', 'gpu_node_group', 'oidc_provider_arn', 'region', 'shoal_role_arn']);
    // Every output and var reference points at something declared.
    const text = readdirSync(MODULE).map((f) => readFileSync(join(MODULE, f), 'utf8')).join('\n');
    const declared = new Set(variables.map((v) => v.labels[0]));
    for (const ref of text.matchAll(/\bvar\.([a-z_]+)/g)) expect(declared.has(ref[1]), `var.${ref[1]}`).toBe(true);
    const resources = new Set(all.filter((b) => b.kind === 'resource' || b.kind === 'data').map((b) => `${b.kind === 'data' ? 'data.' : ''}${b.labels[0]}.${b.labels[1]}`));
    for (const ref of text.matchAll(/\bdata\.([a-z0-9_]+)\.([a-z0-9_]+)\b/g)) expect(resources.has(`data.${ref[1]}.${ref[2]}`), ref[0]).toBe(true);
    for (const ref of text.matchAll(/(?<![.\w])((?:aws|helm|tls|kubernetes|random)_[a-z0-9_]+)\.([a-z0-9_]+)\b/g)) expect(resources.has(`${ref[1]}.${ref[2]}`), ref[0]).toBe(true);
    // Every provider a resource belongs to is required (versions.tf) and configured by the example.
    const versions = readFileSync(join(MODULE, 'versions.tf'), 'utf8');
    const example = readFileSync(join(DIR, 'examples', 'eks', 'main.tf'), 'utf8');
    for (const provider of new Set(all.filter((b) => b.kind === 'resource' || b.kind === 'data').map((b) => (b.labels[0] ?? '').split('_')[0]))) {
      expect(versions, provider).toMatch(new RegExp(`\\b${provider} = \\{\\s*source\\s+= "hashicorp/${provider}"`));
      expect(example, provider).toContain(`source = "hashicorp/${provider}"`);
    }
    expect(example).toMatch(/provider "kubernetes" \{/);
  });

  it('has a CPU node group and a GPU spot node group that scales to zero, tainted for GPU pools only', () => {
    const groups = moduleBlocks(MODULE).filter((b) => b.kind === 'resource' && b.labels[0] === 'aws_eks_node_group');
    const gpu = groups.find((g) => g.labels[1] === 'gpu');
    expect(groups.map((g) => g.labels[1]).sort()).toEqual(['cpu', 'gpu']);
    expect(attribute(gpu?.body ?? '', 'capacity_type')).toBe('"SPOT"');
    expect(attribute(gpu?.body ?? '', 'min_size')).toBe('0');
    expect(gpu?.body).toMatch(/key\s+=\s+"nvidia.com\/gpu"[\s\S]*effect\s+=\s+"NO_SCHEDULE"/);
    // The labels and taint the chart's values-aws.yaml selects and tolerates.
    const aws = readFileSync(join(REPO_ROOT, 'deploy', 'helm', 'shoal', 'values-aws.yaml'), 'utf8');
    expect(gpu?.body).toContain('"shoal.dev/node" = "gpu"');
    expect(aws).toContain('shoal.dev/node: gpu');
    expect(aws).toMatch(/key: nvidia.com\/gpu\s+operator: Exists\s+effect: NoSchedule/);
  });

  it('installs KEDA, NATS and the Shoal release, with the workload identity on the chart service account', () => {
    const releases = moduleBlocks(MODULE).filter((b) => b.kind === 'resource' && b.labels[0] === 'helm_release');
    expect(releases.map((r) => r.labels[1]).sort()).toEqual(['keda', 'kube_prometheus_stack', 'nats', 'nvidia_device_plugin', 'shoal']);
    const shoal = releases.find((r) => r.labels[1] === 'shoal');
    expect(shoal?.body).toContain('serviceAccount.annotations.eks\\\\.amazonaws\\\\.com/role-arn');
    const dependsOn = /depends_on\s+=\s+\[([^\]]*)\]/.exec(shoal?.body ?? '')?.[1]?.split(',').map((d) => d.trim()).filter((d) => d !== '') ?? [];
    expect(dependsOn.sort()).toEqual(['helm_release.keda', 'helm_release.kube_prometheus_stack', 'helm_release.nats', 'helm_release.nvidia_device_plugin', 'kubernetes_secret_v1.api_tokens', 'kubernetes_secret_v1.nats_users']);
    const role = moduleBlocks(MODULE).find((b) => b.kind === 'resource' && b.labels[1] === 'shoal' && b.labels[0] === 'aws_iam_role');
    expect(role?.body).toContain('system:serviceaccount:${var.namespace}:${local.service_account}');
  });

  it('gives a fresh cluster what values-aws.yaml needs: Secrets, storage, GPU plugin, Prometheus CRDs, NATS users and store, the bucket', () => {
    const all = moduleBlocks(MODULE);
    const resource = (type: string, name: string): Block | undefined => all.find((b) => b.kind === 'resource' && b.labels[0] === type && b.labels[1] === name);
    const aws = parse(readFileSync(join(REPO_ROOT, 'deploy', 'helm', 'shoal', 'values-aws.yaml'), 'utf8')) as {
      nats: { auth: { existingSecret: string } };
      apiTokens: { existingSecret: string };
      pools: Array<{ name: string; cache?: { existingClaim?: string; ephemeral?: { enabled: boolean; storageClass: string } } }>;
      prometheus: { serverAddress: string };
      serviceMonitor: { labels: Record<string, string> };
    };
    // The Secrets the overlay names, with the keys the chart reads (<component>-password, tokens).
    const natsUsers = resource('kubernetes_secret_v1', 'nats_users');
    expect(natsUsers?.body).toContain(`name      = "${aws.nats.auth.existingSecret}"`);
    expect(natsUsers?.body).toContain('"${c}-password" => random_password.nats[c].result');
    expect(resource('kubernetes_secret_v1', 'api_tokens')?.body).toContain(`name      = "${aws.apiTokens.existingSecret}"`);
    expect(resource('kubernetes_secret_v1', 'api_tokens')?.body).toMatch(/data = \{ tokens = random_password.api_token.result \}/);
    // No pool names a claim nothing creates; per-pod volumes come from a StorageClass the module creates, provisioned by the EBS CSI add-on.
    expect(aws.pools.filter((p) => p.cache?.existingClaim !== undefined && p.cache.existingClaim !== '')).toEqual([]);
    const classes = all.filter((b) => b.kind === 'resource' && b.labels[0] === 'kubernetes_storage_class_v1');
    for (const pool of aws.pools.filter((p) => p.cache?.ephemeral?.enabled === true)) {
      expect(classes.some((c) => c.body.includes(`name        = "${pool.cache?.ephemeral?.storageClass ?? ''}"`)), pool.name).toBe(true);
    }
    expect(classes[0]?.body).toContain('storage_provisioner    = "ebs.csi.aws.com"');
    expect(classes[0]?.body).toContain('"storageclass.kubernetes.io/is-default-class" = "true"');
    const addon = resource('aws_eks_addon', 'ebs_csi');
    expect(attribute(addon?.body ?? '', 'addon_name')).toBe('"aws-ebs-csi-driver"');
    expect(attribute(addon?.body ?? '', 'service_account_role_arn')).toBe('aws_iam_role.ebs_csi.arn');
    expect(resource('aws_iam_role', 'ebs_csi')?.body).toContain('system:serviceaccount:kube-system:ebs-csi-controller-sa');
    expect(resource('aws_iam_role_policy_attachment', 'ebs_csi')?.body).toContain('policy/service-role/AmazonEBSCSIDriverPolicy');
    // The device plugin on the GPU nodes, tolerating their taint.
    const plugin = resource('helm_release', 'nvidia_device_plugin');
    expect(attribute(plugin?.body ?? '', 'chart')).toBe('"nvidia-device-plugin"');
    expect(plugin?.body).toContain('key = "nvidia.com/gpu", operator = "Exists", effect = "NoSchedule"');
    expect(plugin?.body).toContain('key = "shoal.dev/node", operator = "In", values = ["gpu"]');
    // kube-prometheus-stack under the release name the overlay's labels and Prometheus address use; off turns the two objects off.
    const stack = resource('helm_release', 'kube_prometheus_stack');
    expect(attribute(stack?.body ?? '', 'name')).toBe(`"${aws.serviceMonitor.labels.release ?? ''}"`);
    expect(aws.prometheus.serverAddress).toContain(`${aws.serviceMonitor.labels.release ?? ''}-prometheus.${(attribute(stack?.body ?? '', 'namespace') ?? '').slice(1, -1)}.svc`);
    const shoal = resource('helm_release', 'shoal');
    expect(shoal?.body).toContain('serviceMonitor = { enabled = var.install_kube_prometheus_stack }');
    expect(shoal?.body).toContain('prometheusRule = { enabled = var.install_kube_prometheus_stack }');
    // The bucket and region reach the chart (SHOAL_S3_BUCKETS, AWS_REGION).
    expect(shoal?.body).toContain('s3             = { buckets = [aws_s3_bucket.shoal.bucket], region = var.region }');
    // NATS: the users of the permission file with the Secret's passwords, and a store above what Shoal's streams reserve.
    const nats = resource('helm_release', 'nats');
    expect(nats?.body).toContain('merge = { authorization = { users = local.nats_users } }');
    const main = readFileSync(join(MODULE, 'main.tf'), 'utf8');
    expect(main).toContain('yamldecode(file("${var.shoal_chart_path}/files/nats-permissions.yaml"))');
    expect(main).toContain('password = random_password.nats[c].result');
    // Every user of the permission file, so the Secret has each <component>-password the chart reads.
    expect(main).toContain(`nats_components  = [${COMPONENTS.map((c) => `"${c}"`).join(', ')}]`);
    const storeVariable = all.find((b) => b.kind === 'variable' && b.labels[0] === 'nats_store_size');
    const gib = Number(/^"(\d+)Gi"$/.exec(attribute(storeVariable?.body ?? '', 'default') ?? '')?.[1]);
    // Shoal sizes its three streams from the free store (a quarter each, at most the ceiling): a store of four ceilings gives them their full size.
    expect(gib * 1024 ** 3).toBeGreaterThanOrEqual(FREE_STORE_SHARES * STREAM_BYTES_CEILING);
    expect(nats?.body).toContain('pvc = { size = var.nats_store_size }');
  });

  it('the example calls the module with every required variable', () => {
    const example = blocks(readFileSync(join(DIR, 'examples', 'eks', 'main.tf'), 'utf8'));
    const call = example.find((b) => b.kind === 'module' && b.labels[0] === 'shoal');
    expect(attribute(call?.body ?? '', 'source')).toBe('"../../modules/eks-shoal"');
    for (const name of ['name', 'region', 'shoal_chart_path', 'subnet_ids', 'vpc_id']) expect(attribute(call?.body ?? '', name), name).not.toBeNull();
    expect(existsSync(join(DIR, 'examples', 'eks', JSON.parse(`"${(attribute(call?.body ?? '', 'shoal_chart_path') ?? '').slice(1, -1).replace('${path.module}/', '')}"`) as string, 'Chart.yaml'))).toBe(true);
    expect(execFileSync('ls', [join(DIR, 'examples', 'eks')]).toString()).toContain('main.tf');
  });
});
