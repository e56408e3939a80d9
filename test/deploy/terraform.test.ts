import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
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
    expect(outputs.map((o) => o.labels[0]).sort()).toEqual(['bucket_name', 'cluster_ca_certificate', 'cluster_endpoint', 'cluster_name', 'gpu_node_group', 'oidc_provider_arn', 'region', 'shoal_role_arn']);
    // Every output and var reference points at something declared.
    const text = readdirSync(MODULE).map((f) => readFileSync(join(MODULE, f), 'utf8')).join('\n');
    const declared = new Set(variables.map((v) => v.labels[0]));
    for (const ref of text.matchAll(/\bvar\.([a-z_]+)/g)) expect(declared.has(ref[1]), `var.${ref[1]}`).toBe(true);
    const resources = new Set(all.filter((b) => b.kind === 'resource' || b.kind === 'data').map((b) => `${b.kind === 'data' ? 'data.' : ''}${b.labels[0]}.${b.labels[1]}`));
    for (const ref of text.matchAll(/\bdata\.([a-z0-9_]+)\.([a-z0-9_]+)\b/g)) expect(resources.has(`data.${ref[1]}.${ref[2]}`), ref[0]).toBe(true);
    for (const ref of text.matchAll(/(?<![.\w])((?:aws|helm|tls)_[a-z0-9_]+)\.([a-z0-9_]+)\b/g)) expect(resources.has(`${ref[1]}.${ref[2]}`), ref[0]).toBe(true);
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
    expect(releases.map((r) => r.labels[1]).sort()).toEqual(['keda', 'nats', 'shoal']);
    const shoal = releases.find((r) => r.labels[1] === 'shoal');
    expect(shoal?.body).toContain('serviceAccount.annotations.eks\\\\.amazonaws\\\\.com/role-arn');
    expect(shoal?.body).toMatch(/depends_on\s+=\s+\[helm_release.keda, helm_release.nats\]/);
    const role = moduleBlocks(MODULE).find((b) => b.kind === 'resource' && b.labels[1] === 'shoal' && b.labels[0] === 'aws_iam_role');
    expect(role?.body).toContain('system:serviceaccount:${var.namespace}:${local.service_account}');
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
