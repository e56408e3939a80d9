import { call, callJson, describeError } from './api.js';
import { byId, element } from './dom.js';
import { bytes, clock, seconds } from './format.js';
import { parsePrometheus, sumBy, type Sample } from './prometheus.js';
import { isRecord, records, strings, text, type Json } from './schema.js';

/**
 * The models view: the served models (GET /v1/models) and, from the same data as /metrics, the
 * memory budget and what resident models use of it, and per lane the queued items, batches run
 * and mean queue wait. A gateway whose models run in other processes (workers) has no pool
 * metrics of its own: the view says so instead of showing zeros. Polled every 2 seconds while shown.
 */

const POLL_MS = 2_000;
const LANES = ['interactive', 'bulk'];

let timer: ReturnType<typeof setTimeout> | null = null;
let active = false;

/** GET /v1/models' list, for the other views (rerankers, upload models) too. */
export async function servedModels(): Promise<Json[]> {
  const body = await callJson('/v1/models');
  return records(isRecord(body) ? body.data : undefined);
}

async function metrics(): Promise<Sample[]> {
  const response = await call('/metrics');
  if (!response.ok) return [];
  return parsePrometheus(await response.text());
}

function renderMemory(samples: readonly Sample[]): void {
  const budget = sumBy(samples, 'shoal_pool_budget_bytes').get('');
  const resident = sumBy(samples, 'shoal_pool_resident_bytes').get('') ?? 0;
  const meter = byId('memory-meter');
  if (budget === undefined || budget <= 0) {
    byId('memory-text').textContent = 'This process holds no model pool (the models run in the workers): see their /metrics.';
    meter.hidden = true;
    return;
  }
  meter.hidden = false;
  meter.max = budget;
  meter.value = String(resident);
  byId('memory-text').textContent = `${bytes(resident)} of ${bytes(budget)} budget used by resident models (${Math.round((resident / budget) * 100)} %).`;
}

function renderModels(models: readonly Json[], samples: readonly Sample[]): void {
  const residentBytes = sumBy(samples, 'shoal_model_resident_bytes', 'model');
  const rows = models.map((model) => {
    const id = text(model, 'id') ?? '';
    const resident = model.resident === true || (residentBytes.get(id) ?? 0) > 0;
    const used = residentBytes.get(id);
    return element(
      'tr',
      { attributes: { 'data-model': id } },
      element('td', {}, element('code', { text: id })),
      element('td', { text: text(model, 'family') ?? '' }),
      element('td', { text: strings(model.primitives).join(', ') }),
      element('td', { text: resident ? 'yes' : 'no' }),
      element('td', { text: used === undefined ? '' : bytes(used) }),
    );
  });
  byId('models-table').querySelector('tbody')?.replaceChildren(...rows);
}

function renderLanes(samples: readonly Sample[]): void {
  const queued = sumBy(samples, 'shoal_queue_items', 'lane');
  const batches = sumBy(samples, 'shoal_batches_total', 'lane');
  const waitSum = sumBy(samples, 'shoal_queue_wait_seconds_sum', 'lane');
  const waitCount = sumBy(samples, 'shoal_queue_wait_seconds_count', 'lane');
  const lanes = [...new Set([...LANES, ...batches.keys(), ...waitCount.keys(), ...queued.keys()])].filter((lane) => lane !== '');
  const meanWait = (lane: string): string => {
    const n = waitCount.get(lane) ?? 0;
    return n === 0 ? '' : seconds((waitSum.get(lane) ?? 0) / n);
  };
  const rows = lanes.map((lane) =>
    element('tr', { attributes: { 'data-lane': lane } }, element('th', { text: lane, attributes: { scope: 'row' } }), element('td', { text: queued.has(lane) ? String(queued.get(lane)) : '' }), element('td', { text: String(batches.get(lane) ?? 0) }), element('td', { text: meanWait(lane) })),
  );
  // A worker of an older release counted every lane's items together (no lane label): its total has a row of its own.
  if (queued.has('')) rows.push(element('tr', { attributes: { 'data-lane': 'all' } }, element('th', { text: 'all lanes', attributes: { scope: 'row' } }), element('td', { text: String(queued.get('')) }), element('td'), element('td')));
  byId('lanes-table').querySelector('tbody')?.replaceChildren(...rows);
}

async function refresh(): Promise<void> {
  const status = byId('models-status');
  try {
    const [models, samples] = await Promise.all([servedModels(), metrics()]);
    renderMemory(samples);
    renderModels(models, samples);
    renderLanes(samples);
    byId('models-error').textContent = '';
    status.textContent = `${models.length} ${models.length === 1 ? 'model' : 'models'} served. Updated ${clock(new Date())}.`;
  } catch (error) {
    // An alert of its own: the status line changes every 2 s and is not announced.
    byId('models-error').textContent = describeError(error);
  }
}

async function loop(): Promise<void> {
  await refresh();
  if (active) timer = setTimeout(() => void loop(), POLL_MS);
}

export function showModels(): void {
  if (active) return;
  active = true;
  void loop();
}

export function hideModels(): void {
  active = false;
  if (timer !== null) clearTimeout(timer);
  timer = null;
}
