/**
 * Text from outside (file names, object keys, the reasons that quote them) made safe to print on a
 * terminal: control characters (C0, DEL, C1), line and paragraph separators and bidirectional
 * overrides are written as escapes. A file named `\x1b[2J.pdf` cleared the screen when
 * `shoal ingest` printed it, and a name holding a newline forged a line of the summary.
 */

const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

const SHORT: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function escape(char: string): string {
  const short = SHORT[char];
  if (short !== undefined) return short;
  const code = char.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/** `text` on one line, every character a terminal would act on escaped. */
export function printable(text: string): string {
  return text.replace(UNPRINTABLE, escape);
}

/**
 * Like printable, but the line breaks of a message of several lines (a server's log tail) are
 * kept, each line escaped and the ones after the first indented by two spaces: a newline in a
 * quoted name cannot start a line that reads as the CLI's own (`error [...]`, `failed ...`).
 */
export function printableLines(text: string): string {
  return text.split('\n').map(printable).join('\n  ');
}
