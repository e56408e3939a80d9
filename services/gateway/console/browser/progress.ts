import { element, type ConsoleElement } from './dom.js';
import { child, count, records, text, type Json } from './schema.js';

/**
 * What a job's status says of its progress and failures, whatever its kind: an ingest run
 * (documents ended of total), a classification job (items done), a primitive job (parts ended).
 * Shared by the runs view and the upload view.
 */

export type JobKind = 'ingest' | 'classify' | 'job';

export const FINISHED_STATES: ReadonlySet<string> = new Set(['completed', 'partial', 'failed']);

export function jobKind(status: Json): JobKind {
  const kind = text(status, 'kind');
  return kind === 'ingest' || kind === 'classify' ? kind : 'job';
}

/** Done and total, in the unit of the job's kind. */
export function progressOf(status: Json): { done: number; total: number; unit: string } {
  const kind = jobKind(status);
  if (kind === 'ingest') {
    const documents = child(status, 'documents') ?? {};
    const total = count(status, 'expected') ?? count(documents, 'total') ?? 0;
    const done = (count(documents, 'ok') ?? 0) + (count(documents, 'failed') ?? 0) + (count(documents, 'unchanged') ?? 0);
    return { done, total, unit: 'documents' };
  }
  if (kind === 'classify') return { done: count(status, 'items_done') ?? 0, total: count(status, 'items') ?? 0, unit: 'items' };
  return { done: (count(status, 'parts_done') ?? 0) + (count(status, 'parts_failed') ?? 0), total: count(status, 'parts') ?? 0, unit: 'parts' };
}

/** The counts line of an ingest run: indexed, unchanged, failed; pages and chunks. */
export function ingestSummary(status: Json): string {
  const documents = child(status, 'documents') ?? {};
  return `${count(documents, 'ok') ?? 0} indexed, ${count(documents, 'unchanged') ?? 0} unchanged, ${count(documents, 'failed') ?? 0} failed; ${count(status, 'pages') ?? 0} pages, ${count(status, 'chunks') ?? 0} chunks`;
}

/** Every failure the status names, as `CODE where: reason`. */
export function failuresOf(status: Json): Array<{ code: string; where: string; reason: string }> {
  const out: Array<{ code: string; where: string; reason: string }> = [];
  const error = child(status, 'error');
  if (error !== undefined) out.push({ code: text(error, 'code') ?? 'ERROR', where: 'run', reason: text(error, 'message') ?? '' });
  for (const failure of records(status.failed)) out.push({ code: text(failure, 'code') ?? 'ERROR', where: text(failure, 'source') ?? '', reason: text(failure, 'reason') ?? '' });
  for (const failure of records(status.errors)) out.push({ code: text(failure, 'code') ?? 'ERROR', where: `part ${count(failure, 'part') ?? '?'}`, reason: text(failure, 'message') ?? '' });
  return out;
}

export function failureList(status: Json): ConsoleElement {
  return element(
    'ul',
    { className: 'failures' },
    ...failuresOf(status).map((failure) => element('li', {}, element('code', { text: failure.code }), ` ${failure.where}: ${failure.reason}`)),
  );
}

export function progressBar(status: Json, label: string): ConsoleElement {
  const { done, total } = progressOf(status);
  const bar = element('progress', { attributes: { max: String(Math.max(total, 1)), value: String(done), 'aria-label': label } });
  return bar;
}
