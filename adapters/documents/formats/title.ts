/**
 * A metadata title as people would write it: printer drivers and office suites store the
 * application and file name ("Microsoft Word - agenda.doc", "10811.exe"); those parts go, and what
 * is left must have a letter.
 */
export function usableTitle(raw: string): string | undefined {
  const title = raw
    .replace(/^\s*Microsoft (Word|PowerPoint|Excel) - /i, '')
    .replace(/\.(docx?|xlsx?|pptx?|rtf|txt|exe|pdf|indd|qxd|tmp|tex|dvi)\s*$/i, '')
    .trim();
  return /\p{L}/u.test(title) ? title : undefined;
}
