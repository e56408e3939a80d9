import { callJson, describeError } from './api.js';
import { byId, element } from './dom.js';
import { clock } from './format.js';
import { failureList, jobKind, progressBar, progressOf } from './progress.js';
import { isRecord, records, text } from './schema.js';

/**
 * The runs view: GET /v1/jobs (the ingest runs, classification jobs and primitive jobs this
 * gateway accepted lately), polled every 2 seconds while the view is shown, with each one's
 * state, progress and failures with their codes.
 */

const POLL_MS = 2_000;
const KIND_NAMES = { ingest: 'ingest run', classify: 'classification', job: 'job' } as const;

let timer: ReturnType<typeof setTimeout> | null = null;
let active = false;

async function refresh(): Promise<void> {
  const status = byId('runs-status');
  try {
    const body = await callJson('/v1/jobs?limit=50');
    const jobs = records(isRecord(body) ? body.jobs : undefined);
    const rows = jobs.map((job) => {
      const id = text(job, 'job_id') ?? '';
      const state = text(job, 'state') ?? 'unknown';
      const kind = jobKind(job);
      const { done, total, unit } = progressOf(job);
      const detail = kind === 'ingest' ? `${text(job, 'index') ?? ''}` : (text(job, 'model') ?? text(job, 'primitive') ?? '');
      return element(
        'tr',
        { attributes: { 'data-job': id } },
        element('td', {}, element('code', { text: id })),
        element('td', { text: `${KIND_NAMES[kind]}${detail === '' ? '' : ` · ${detail}`}` }),
        element('td', { className: `state-${state}`, text: state }),
        element('td', {}, progressBar(job, `progress of ${id}`), ` ${done} of ${total} ${unit}`),
        element('td', {}, failureList(job)),
      );
    });
    byId('runs-table').querySelector('tbody')?.replaceChildren(...rows);
    byId('runs-error').textContent = '';
    status.textContent = jobs.length === 0 ? `No job yet. Updated ${clock(new Date())}.` : `${jobs.length} shown. Updated ${clock(new Date())}.`;
  } catch (error) {
    // An alert of its own: the status line changes every 2 s and is not announced.
    byId('runs-error').textContent = describeError(error);
  }
}

async function loop(): Promise<void> {
  await refresh();
  if (active) timer = setTimeout(() => void loop(), POLL_MS);
}

export function showRuns(): void {
  if (active) return;
  active = true;
  void loop();
}

export function hideRuns(): void {
  active = false;
  if (timer !== null) clearTimeout(timer);
  timer = null;
}
