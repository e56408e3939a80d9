import { Parser } from 'htmlparser2';
import { requireText, type Heading } from './text-reader.js';

/**
 * The visible text of an HTML page: script, style, head, template and other non-rendered elements
 * (and any element with the `hidden` attribute or an inline `display: none`) are dropped; block elements start new lines (paragraph-like ones a blank line); runs of
 * whitespace collapse as a browser collapses them, except inside <pre>. `<h1>`..`<h6>` become
 * headings and `<title>` the title.
 */

export interface HtmlText {
  text: string;
  headings: Heading[];
  title?: string;
}

/** Elements whose content is never rendered as text. */
const HIDDEN = new Set(['script', 'style', 'head', 'template', 'noscript', 'svg', 'math', 'iframe', 'object', 'canvas', 'select', 'datalist']);
/** Elements that end a paragraph: a blank line before and after. */
const PARAGRAPH = new Set(['p', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'pre', 'blockquote', 'table', 'ul', 'ol', 'dl', 'figure', 'hr', 'section', 'article', 'header', 'footer', 'main', 'nav', 'aside', 'form', 'fieldset', 'details', 'address']);
/** Elements that start a new line. */
const LINE = new Set(['div', 'li', 'dt', 'dd', 'tr', 'br', 'caption', 'figcaption', 'summary', 'option', 'legend', 'body', 'html']);
const CELL = new Set(['td', 'th']);
const HEADING = /^h[1-6]$/;

type Break = 0 | 1 | 2;

/** An element a browser does not render: the `hidden` attribute, or an inline `display: none`. */
function notRendered(attributes: Record<string, string>): boolean {
  return 'hidden' in attributes || /(^|;)\s*display\s*:\s*none\b/i.test(attributes.style ?? '');
}

/** The visible text of an HTML page (`<title>` aside); DOCUMENT_EMPTY when there is none. `what` names the document in that error. */
export function readHtml(html: string, what = 'HTML page'): HtmlText {
  const read = htmlText(html);
  requireText(read.text, what);
  return read;
}

/** The visible text, headings and title of an HTML page or fragment; the text may be empty (an EPUB's cover page). */
export function htmlText(html: string): HtmlText {
  let text = '';
  /** The break owed before the next visible text: 1 = newline, 2 = blank line. */
  let pendingBreak: Break = 0;
  let pendingSpace = false;
  let hiddenDepth = 0;
  let preDepth = 0;
  let titleDepth = 0;
  let title = '';
  const headings: Heading[] = [];
  let heading: { offset: number; depth: number } | null = null;
  let depth = 0;

  const owe = (kind: Break): void => {
    if (kind > pendingBreak) pendingBreak = kind;
  };
  const emit = (raw: string): void => {
    const chunk = preDepth > 0 ? raw : raw.replace(/\s+/g, ' ');
    if (chunk.length === 0) return;
    if (preDepth === 0 && chunk === ' ') {
      pendingSpace = text.length > 0;
      return;
    }
    let body = chunk;
    if (text.length > 0 && pendingBreak > 0) {
      text = text.replace(/[ \t]+$/, '');
      text += pendingBreak === 2 ? '\n\n' : '\n';
      body = preDepth > 0 ? body : body.replace(/^ /, '');
    } else if (text.length === 0) {
      body = preDepth > 0 ? body : body.replace(/^ /, '');
    } else if (pendingSpace && !/\s$/.test(text) && !/^\s/.test(body)) {
      text += ' ';
    }
    pendingBreak = 0;
    pendingSpace = preDepth === 0 && /\s$/.test(body);
    if (pendingSpace) body = body.replace(/ $/, '');
    if (heading !== null && heading.offset < 0) heading.offset = text.length;
    text += body;
  };

  const parser = new Parser(
    {
      onopentag(name, attributes) {
        depth++;
        // The title lives in the (hidden) head; it is collected on its own.
        if (name === 'title') titleDepth++;
        if (hiddenDepth > 0 || HIDDEN.has(name) || notRendered(attributes)) {
          hiddenDepth++;
          return;
        }
        if (name === 'pre') preDepth++;
        if (PARAGRAPH.has(name)) owe(2);
        else if (LINE.has(name)) owe(1);
        else if (CELL.has(name)) pendingSpace = text.length > 0;
        if (name === 'br') owe(1);
        if (HEADING.test(name) && heading === null) heading = { offset: -1, depth };
      },
      ontext(data) {
        if (titleDepth > 0) {
          title += data;
          return;
        }
        if (hiddenDepth > 0) return;
        emit(data);
      },
      onclosetag(name) {
        if (name === 'title') titleDepth = Math.max(0, titleDepth - 1);
        if (hiddenDepth > 0) {
          hiddenDepth--;
          depth--;
          return;
        }
        if (name === 'pre') preDepth = Math.max(0, preDepth - 1);
        if (heading !== null && heading.depth === depth) {
          const headingText = heading.offset >= 0 ? text.slice(heading.offset).trim() : '';
          if (headingText.length > 0) headings.push({ offset: heading.offset, text: headingText });
          heading = null;
        }
        if (PARAGRAPH.has(name)) owe(2);
        else if (LINE.has(name)) owe(1);
        depth--;
      },
    },
    { decodeEntities: true, lowerCaseTags: true, recognizeSelfClosing: true },
  );
  parser.write(html);
  parser.end();
  const result: HtmlText = { text: text.trimEnd(), headings };
  const cleanTitle = title.replace(/\s+/g, ' ').trim();
  if (cleanTitle.length > 0) result.title = cleanTitle;
  return result;
}
