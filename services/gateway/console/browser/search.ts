import { callJson, describeError, postJson } from './api.js';
import { byId, element, type ConsoleElement } from './dom.js';
import { excerpt, highlighted, queryTerms } from './highlight.js';
import { child, count, isRecord, records, strings, text, type Json } from './schema.js';

/**
 * The search view: index, query, mode, filter, k and rerank → POST /v1/search; each hit with its
 * source, page, heading (when the index has one) and the query's words marked; a hit opens in the
 * detail panel, with a link to its document when its source is a web address. The modes are read
 * from /openapi.json (the `mode` enum of the search body), so a mode the gateway adds appears here
 * without a console change.
 */

/** The modes when /openapi.json cannot be read. */
const FALLBACK_MODES = ['dense', 'sparse', 'hybrid'];
const EXCERPT_CHARS = 420;

let hits: Json[] = [];
let terms: string[] = [];

/** `properties.mode` of the search body, however the document spells the enum (inline, anyOf, $ref). */
function modeEnum(document: unknown): string[] {
  if (!isRecord(document)) return [];
  const components = child(child(document, 'components') ?? {}, 'schemas') ?? {};
  const resolve = (schema: Json | undefined): Json | undefined => {
    const ref = schema === undefined ? undefined : text(schema, '$ref');
    return ref === undefined ? schema : child(components, ref.split('/').pop() ?? '');
  };
  const post = child(child(child(document, 'paths') ?? {}, '/v1/search') ?? {}, 'post') ?? {};
  const body = resolve(child(child(child(child(post, 'requestBody') ?? {}, 'content') ?? {}, 'application/json') ?? {}, 'schema'));
  const mode = resolve(child(child(body ?? {}, 'properties') ?? {}, 'mode'));
  if (mode === undefined) return [];
  const direct = strings(mode.enum);
  if (direct.length > 0) return direct;
  return records(mode.anyOf).flatMap((option) => strings(resolve(option)?.enum));
}

/** Index names from GET /v1/indexes where the gateway has that route: `{indexes | data: [name | {name}]}` or a list. */
export async function indexNames(): Promise<string[]> {
  try {
    const body = await callJson('/v1/indexes');
    const list: unknown[] = Array.isArray(body) ? body : isRecord(body) ? [body.indexes, body.data].find(Array.isArray) ?? [] : [];
    return list.flatMap((entry) => (typeof entry === 'string' ? [entry] : isRecord(entry) && text(entry, 'name') !== undefined ? [text(entry, 'name') ?? ''] : []));
  } catch {
    // No such route (yet): the index is typed, "default" suggested (shoal dev's index).
    return [];
  }
}

async function fillModes(): Promise<void> {
  const select = byId('search-mode');
  let modes = FALLBACK_MODES;
  try {
    const found = modeEnum(await callJson('/openapi.json'));
    if (found.length > 0) modes = found;
  } catch {
    // The fallback list: the console still searches.
  }
  select.replaceChildren(element('option', { text: 'index default', attributes: { value: '' } }), ...modes.map((mode) => element('option', { text: mode, attributes: { value: mode } })));
}

/** Rerankers: models that score pairs (GET /v1/models lists their operations). */
export function scorers(models: readonly Json[]): string[] {
  return models.filter((model) => strings(model.primitives).includes('score')).flatMap((model) => (text(model, 'id') === undefined ? [] : [text(model, 'id') ?? '']));
}

function fillRerankers(models: readonly Json[]): void {
  const select = byId('search-rerank-model');
  const ids = scorers(models);
  select.replaceChildren(...ids.map((id) => element('option', { text: id, attributes: { value: id } })));
  const toggle = byId('search-rerank');
  toggle.disabled = ids.length === 0;
  if (ids.length === 0) toggle.setAttribute('title', 'no model of this gateway scores pairs');
}

function fact(list: ConsoleElement, name: string, value: ConsoleElement | string): void {
  list.append(element('dt', { text: name }), element('dd', {}, value));
}

/** A link to the hit's document where its source is one a browser can open: a web address (PDFs at the page). */
function documentLink(source: string, page: number | undefined): ConsoleElement | null {
  let url: URL;
  try {
    url = new URL(source);
  } catch {
    return null;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return null;
  if (page !== undefined && /\.pdf$/i.test(url.pathname) && url.hash === '') url.hash = `page=${page}`;
  return element('a', { text: 'Open the document', attributes: { href: url.href, target: '_blank', rel: 'noopener noreferrer' } });
}

function openHit(index: number): void {
  const hit = hits[index];
  if (hit === undefined) return;
  const source = text(hit, 'source') ?? '';
  const page = count(hit, 'page');
  byId('hit-title').textContent = `Hit ${count(hit, 'rank') ?? index + 1}: ${source}`;
  const facts = byId('hit-facts');
  facts.replaceChildren();
  fact(facts, 'Source', element('code', { text: source }));
  if (page !== undefined) fact(facts, 'Page', String(page));
  const heading = text(hit, 'heading');
  if (heading !== undefined && heading !== '') fact(facts, 'Heading', heading);
  fact(facts, 'Score', (count(hit, 'score') ?? 0).toFixed(4));
  fact(facts, 'Chunk id', element('code', { text: text(hit, 'id') ?? '' }));
  fact(facts, 'Document id', element('code', { text: text(hit, 'document_id') ?? '' }));
  for (const [key, name] of [['chunk', 'Chunk'], ['start', 'Start'], ['end', 'End']] as const) {
    const value = count(hit, key);
    if (value !== undefined) fact(facts, name, String(value));
  }
  const link = documentLink(source, page);
  byId('hit-link').replaceChildren(...(link === null ? [] : [link]));
  byId('hit-text').replaceChildren(...highlighted(text(hit, 'text') ?? '', terms));
  const view = byId('hit-view');
  view.hidden = false;
  byId('hit-title').focus();
}

function renderHits(): void {
  const list = byId('search-hits');
  list.replaceChildren(
    ...hits.map((hit, index) => {
      const source = text(hit, 'source') ?? '';
      const open = element('button', { text: `${count(hit, 'rank') ?? index + 1}. ${source}`, attributes: { type: 'button', 'data-hit': String(index) } });
      open.addEventListener('click', () => openHit(index));
      const meta: string[] = [];
      const page = count(hit, 'page');
      if (page !== undefined) meta.push(`page ${page}`);
      const heading = text(hit, 'heading');
      if (heading !== undefined && heading !== '') meta.push(heading);
      meta.push(`score ${(count(hit, 'score') ?? 0).toFixed(4)}`);
      return element(
        'li',
        { className: 'hit' },
        element('h2', {}, open),
        element('p', { className: 'meta', text: meta.join(' · ') }),
        element('p', { className: 'excerpt' }, ...highlighted(excerpt(text(hit, 'text') ?? '', EXCERPT_CHARS), terms)),
      );
    }),
  );
}

async function search(): Promise<void> {
  const status = byId('search-status');
  const query = byId('search-query').value;
  const body: Json = { index: byId('search-index').value.trim(), query, k: Number(byId('search-k').value) || 10 };
  const mode = byId('search-mode').value;
  if (mode !== '') body.mode = mode;
  const filter = byId('search-filter').value.trim();
  if (filter !== '') body.filter = filter;
  if (byId('search-rerank').checked && byId('search-rerank-model').value !== '') body.rerank = byId('search-rerank-model').value;
  status.className = 'status';
  status.textContent = 'Searching…';
  const started = performance.now();
  try {
    const answer = await postJson('/v1/search', body);
    hits = records(isRecord(answer) ? answer.hits : undefined);
    terms = queryTerms(query);
    renderHits();
    byId('hit-view').hidden = true;
    status.textContent = `${hits.length} ${hits.length === 1 ? 'hit' : 'hits'} in ${Math.round(performance.now() - started)} ms`;
  } catch (error) {
    hits = [];
    renderHits();
    status.className = 'error';
    status.textContent = describeError(error);
  }
}

/** Sets the index field (the upload view's "Search this index"). */
export function useIndex(name: string): void {
  byId('search-index').value = name;
}

export function initSearch(models: readonly Json[]): void {
  const rerank = byId('search-rerank');
  rerank.addEventListener('change', () => {
    byId('search-rerank-model').disabled = !rerank.checked;
  });
  byId('search-form').addEventListener('submit', (event) => {
    event.preventDefault();
    void search();
  });
  fillRerankers(models);
  void fillModes();
}
