/** The scheme of an index URI (`postgres`, `file`…, lower case), or undefined for a bare folder path. */
export function uriScheme(value: string): string | undefined {
  return /^([a-z][a-z0-9+.-]*):\/\//i.exec(value)?.[1]?.toLowerCase();
}

/**
 * The URI without its password (user kept), for messages. The password runs from the first ':'
 * after `scheme://` to the **last** '@': a password the user did not percent-encode may hold
 * '/', '?', '#' or '@' (generated ones often do), and a URI that new URL() then refuses is still
 * quoted in the error. An '@' further on (in a query value) only makes more of the URI hidden.
 */
export function redactUri(uri: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(uri);
  if (scheme === null) return uri;
  const start = scheme[0].length;
  const at = uri.lastIndexOf('@');
  const colon = uri.indexOf(':', start);
  if (at < start || colon === -1 || colon > at) return uri;
  return `${uri.slice(0, colon)}:***${uri.slice(at)}`;
}
