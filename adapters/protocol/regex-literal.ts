/**
 * `text` as a regular-expression source that matches exactly it: every character with a meaning
 * in a pattern is escaped (what `RegExp.escape` does in newer runtimes; Node 20 has none).
 */
export function regexLiteral(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
