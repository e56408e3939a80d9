import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { z } from 'zod';
import { DEPLOY_DIR } from '../../deploy/tools/nats-config.js';

/** Every PromQL expression the deployment files use: dashboards, alert rules (and the chart's Prometheus trigger). */

const Dashboard = z.looseObject({ panels: z.array(z.looseObject({ title: z.string(), targets: z.array(z.looseObject({ expr: z.string() })) })) });
const Rules = z.looseObject({ groups: z.array(z.looseObject({ rules: z.array(z.looseObject({ alert: z.string(), expr: z.string() })) })) });

export function dashboardExpressions(): Array<{ where: string; expr: string }> {
  const dir = join(DEPLOY_DIR, 'grafana', 'dashboards');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .flatMap((file) => {
      const dashboard = Dashboard.parse(JSON.parse(readFileSync(join(dir, file), 'utf8')));
      return dashboard.panels.flatMap((panel) => panel.targets.map((t) => ({ where: `${file}: ${panel.title}`, expr: t.expr })));
    });
}

export function alertExpressions(): Array<{ where: string; expr: string }> {
  const rules = Rules.parse(parse(readFileSync(join(DEPLOY_DIR, 'grafana', 'alerts', 'shoal-alerts.yaml'), 'utf8')));
  return rules.groups.flatMap((g) => g.rules.map((r) => ({ where: `alert ${r.alert}`, expr: r.expr })));
}

/** Shoal metric names an expression reads (`shoal_*`), as written (histograms with _bucket etc.). */
export function shoalMetricNames(expr: string): string[] {
  return [...new Set(expr.match(/\bshoal_[a-z0-9_]+/g) ?? [])];
}

/** The metric family of a series name: histogram series carry _bucket/_sum/_count. */
export function familyOf(name: string, families: ReadonlySet<string>): string | null {
  if (families.has(name)) return name;
  const base = name.replace(/_(bucket|sum|count)$/, '');
  return families.has(base) ? base : null;
}

/** `# TYPE name kind` lines of a Prometheus text exposition. */
export function declaredFamilies(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (m?.[1] !== undefined && m[2] !== undefined) out.set(m[1], m[2]);
  }
  return out;
}

/** Label names each selector of an expression uses: `shoal_x{a="1",b!~"2"}` → [shoal_x, [a, b]]. */
export function selectorLabels(expr: string): Array<{ metric: string; labels: string[] }> {
  return [...expr.matchAll(/\b(shoal_[a-z0-9_]+)\{([^}]*)\}/g)].map((m) => ({
    metric: m[1] ?? '',
    labels: [...(m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/g)].map((l) => l[1] ?? ''),
  }));
}

/** Label names seen on the samples of each series name in a text exposition. */
export function sampleLabels(text: string): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}/.exec(line);
    if (m?.[1] === undefined) continue;
    const set = out.get(m[1]) ?? new Set<string>();
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="/g)) set.add(l[1] ?? '');
    out.set(m[1], set);
  }
  return out;
}
