import { call, callJson, describeError } from './api.js';
import { byId, element } from './dom.js';
import { failureList, FINISHED_STATES, ingestSummary, progressOf } from './progress.js';
import { child, isRecord, strings, text, type Json } from './schema.js';

/**
 * The upload view: files posted as multipart/form-data to POST /v1/ingest for an index (and an
 * embedding model, else the pipeline's), then the run watched (GET /v1/jobs/:id every second)
 * until it ends, with its progress, counts and failures.
 */

const POLL_MS = 1_000;

/** The index of the last upload, for its "Search this index" link. */
let uploadedIndex = '';

/** Embedding models: those that encode (GET /v1/models lists their operations). */
function encoders(models: readonly Json[]): string[] {
  return models.filter((model) => strings(model.primitives).includes('encode')).flatMap((model) => (text(model, 'id') === undefined ? [] : [text(model, 'id') ?? '']));
}

function showRun(run: Json): boolean {
  const { done, total, unit } = progressOf(run);
  const bar = byId('upload-progress');
  bar.max = Math.max(total, 1);
  bar.value = String(done);
  const state = text(run, 'state') ?? 'unknown';
  const finished = FINISHED_STATES.has(state);
  byId('upload-state').textContent = `${state}: ${done} of ${total} ${unit} ended; ${ingestSummary(run)}`;
  byId('upload-state').className = `state-${state}`;
  byId('upload-failures').replaceChildren(...Array.from(failureList(run).querySelectorAll('li')));
  byId('upload-search').hidden = !finished || state === 'failed';
  return finished;
}

async function watch(id: string): Promise<void> {
  for (;;) {
    const run = await callJson(`/v1/jobs/${encodeURIComponent(id)}`);
    if (!isRecord(run) || showRun(run)) return;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

async function upload(): Promise<void> {
  const error = byId('upload-error');
  error.textContent = '';
  const files = byId('upload-files').files;
  const index = byId('upload-index').value.trim();
  if (files === null || files.length === 0) {
    error.textContent = 'Choose one or more documents.';
    return;
  }
  const form = new FormData();
  form.append('index', index);
  const model = byId('upload-model').value;
  if (model !== '') form.append('model', model);
  for (const file of Array.from(files)) form.append('file', file, file.name);
  const submit = byId('upload-form').querySelector('button[type="submit"]');
  if (submit !== null) submit.disabled = true;
  try {
    const response = await call('/v1/ingest', { method: 'POST', body: form });
    const body: unknown = await response.json().catch(() => null);
    if (!response.ok || !isRecord(body)) {
      const refusal = isRecord(body) ? child(body, 'error') : undefined;
      throw new Error(`${(refusal === undefined ? undefined : text(refusal, 'code')) ?? `HTTP_${response.status}`}: ${(refusal === undefined ? undefined : text(refusal, 'message')) ?? 'the upload was refused'}`);
    }
    const id = text(body, 'job_id') ?? '';
    byId('upload-run-id').textContent = id;
    byId('upload-run').hidden = false;
    uploadedIndex = index;
    byId('upload-search').hidden = true;
    const status = child(body, 'status');
    if (status === undefined || !showRun(status)) await watch(id);
  } catch (failure) {
    error.textContent = describeError(failure);
  } finally {
    if (submit !== null) submit.disabled = false;
  }
}

export function initUpload(models: readonly Json[], onIndexed: (index: string) => void): void {
  const select = byId('upload-model');
  select.append(...encoders(models).map((id) => element('option', { text: id, attributes: { value: id } })));
  byId('upload-form').addEventListener('submit', (event) => {
    event.preventDefault();
    void upload();
  });
  byId('upload-search').addEventListener('click', () => onIndexed(uploadedIndex));
}

/** Index names for both index fields' suggestions. */
export function suggestIndexes(names: readonly string[]): void {
  const list = byId('index-names');
  const all = names.length > 0 ? names : ['default'];
  list.replaceChildren(...all.map((name) => element('option', { attributes: { value: name } })));
  for (const id of ['search-index', 'upload-index']) {
    const field = byId(id);
    if (field.value === '') field.value = all[0] ?? 'default';
  }
}
