import type { Evaluation, EvaluationGroup } from '../../../../pipelines/classify/index.js';

/** The `--gold` evaluation as a table (default) or one JSON object (`--json`). */

function pct(value: number): string {
  return `${(value * 100).toFixed(1)}%`;
}

function row(name: string, group: EvaluationGroup, levels: readonly string[]): string {
  const cells = [name, String(group.products), ...levels.map((level) => (group.accuracy_by_level[level] === undefined ? '–' : pct(group.accuracy_by_level[level] ?? 0))), pct(group.exact), pct(group.hierarchical.precision), pct(group.hierarchical.recall), pct(group.hierarchical.f1)];
  return `| ${cells.join(' | ')} |`;
}

export function evaluationTable(evaluation: Evaluation): string {
  const levels = Object.keys(evaluation.accuracy_by_level).sort((a, b) => Number(a) - Number(b));
  const header = ['branch', 'products', ...levels.map((level) => `L${level} acc`), 'exact', 'hP', 'hR', 'hF1'];
  const lines = [`| ${header.join(' | ')} |`, `| ${header.map(() => '---').join(' | ')} |`, row('(all)', evaluation, levels)];
  for (const [branch, group] of Object.entries(evaluation.by_branch)) lines.push(row(branch.replaceAll('|', '/'), group, levels));
  return `${lines.join('\n')}\n`;
}

/** Fractions rounded to 6 decimals so the object prints compactly. */
export function evaluationJson(evaluation: Evaluation): string {
  return `${JSON.stringify(evaluation, (_, value: unknown) => (typeof value === 'number' && !Number.isInteger(value) ? Math.round(value * 1e6) / 1e6 : value))}\n`;
}
