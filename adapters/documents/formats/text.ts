import { decodeText, requireText } from '../text-reader.js';
import { defineFormat, whole } from './format.js';

/** Plain text: any text no format before it in the registry claimed (and every inline text record). */

export const textFormat = defineFormat({
  type: 'text',
  sniff: { by: 'text', match: () => ({ type: 'text' }) },
  open(bytes) {
    const text = requireText(decodeText(bytes), 'text file');
    return Promise.resolve(whole('text', [{ page: 1, text, headings: [] }], undefined));
  },
});
