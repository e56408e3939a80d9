/**
 * The Prometheus text exposition format (GET /metrics) read into samples: `name{labels} value`
 * lines; comments, timestamps and malformed lines are skipped. Enough for the gauges and
 * counters the models view shows; it is not a general-purpose parser (no escapes beyond \" \\ \n).
 */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

function unescape(value: string): string {
  return value.replace(/\\(.)/g, (_match, next: string) => (next === 'n' ? '\n' : next));
}

export function parsePrometheus(body: string): Sample[] {
  const samples: Sample[] = [];
  for (const raw of body.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const match = LINE.exec(line);
    if (match === null) continue;
    const value = match[3] === '+Inf' ? Infinity : match[3] === '-Inf' ? -Infinity : Number(match[3]);
    if (Number.isNaN(value)) continue;
    const labels: Record<string, string> = {};
    for (const label of (match[2] ?? '').matchAll(LABEL)) labels[label[1] ?? ''] = unescape(label[2] ?? '');
    samples.push({ name: match[1] ?? '', labels, value });
  }
  return samples;
}

/** The sum of the samples of one metric, optionally grouped by one label (`''` for samples without it). */
export function sumBy(samples: readonly Sample[], name: string, label?: string): Map<string, number> {
  const sums = new Map<string, number>();
  for (const sample of samples) {
    if (sample.name !== name) continue;
    const key = label === undefined ? '' : (sample.labels[label] ?? '');
    sums.set(key, (sums.get(key) ?? 0) + sample.value);
  }
  return sums;
}
