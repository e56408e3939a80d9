import { decodeText, markdownHeadings, requireText, stripFrontMatter } from '../text-reader.js';
import { defineFormat, whole } from './format.js';

/** Markdown: text named `.md`/`.markdown`/`.mdown`/`.mkd`; ATX and setext headings, YAML front matter cut (its `title:` kept). */

const MARKDOWN_EXTENSIONS = new Set(['md', 'markdown', 'mdown', 'mkd']);

export const markdownFormat = defineFormat({
  type: 'markdown',
  sniff: { by: 'text', match: ({ extension }) => (MARKDOWN_EXTENSIONS.has(extension) ? { type: 'markdown' } : null) },
  open(bytes) {
    const front = stripFrontMatter(decodeText(bytes));
    const text = requireText(front.text, 'Markdown file');
    const headings = markdownHeadings(text);
    return Promise.resolve(whole('markdown', [{ page: 1, text, headings }], front.title ?? headings[0]?.text));
  },
});
