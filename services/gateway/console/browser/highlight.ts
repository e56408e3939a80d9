import { element, type ConsoleElement } from './dom.js';

/**
 * The query's words marked in a hit's text (`<mark>`), built as text nodes and elements, never
 * as HTML: a document's text cannot inject markup into the page.
 */

/** The words of a query worth marking: two characters or more, each once, longest first (so "harbour" wins over "harb"). */
export function queryTerms(query: string): string[] {
  const words = query.toLowerCase().match(/[\p{L}\p{N}]{2,}/gu) ?? [];
  return [...new Set(words)].sort((a, b) => b.length - a.length).slice(0, 32);
}

function escapeRegExp(term: string): string {
  return term.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** `text` as strings and `<mark>` elements around every occurrence of a term (case-insensitive). */
export function highlighted(text: string, terms: readonly string[]): Array<ConsoleElement | string> {
  if (terms.length === 0) return [text];
  const pattern = new RegExp(`(${terms.map(escapeRegExp).join('|')})`, 'giu');
  const parts: Array<ConsoleElement | string> = [];
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    const start = match.index;
    if (start > last) parts.push(text.slice(last, start));
    parts.push(element('mark', { text: match[0] }));
    last = start + match[0].length;
  }
  if (last < text.length) parts.push(text.slice(last));
  return parts;
}

/** The first `limit` characters, cut at a word and marked as cut. */
export function excerpt(text: string, limit: number): string {
  if (text.length <= limit) return text;
  const cut = text.lastIndexOf(' ', limit);
  return `${text.slice(0, cut > limit / 2 ? cut : limit)} …`;
}
