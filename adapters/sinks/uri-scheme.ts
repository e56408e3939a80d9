/** The scheme of an index URI (`postgres`, `file`…, lower case), or undefined for a bare folder path. */
export function uriScheme(value: string): string | undefined {
  return /^([a-z][a-z0-9+.-]*):\/\//i.exec(value)?.[1]?.toLowerCase();
}
