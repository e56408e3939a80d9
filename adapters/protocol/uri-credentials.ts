/**
 * URIs with their credentials hidden, for messages, logs and stored statuses. One rule for every
 * kind of URI (index, object store, NATS server): the user info runs from just after `scheme://`
 * to the **last** '@', since a password the user did not percent-encode may itself hold '/', '?',
 * '#' or '@' (generated ones often do), and a URI that new URL() then refuses is still quoted in
 * an error. An '@' further on (in a query value) only makes more of the URI hidden.
 */

/** Where the user info of `uri` starts and the '@' that ends it, or null when it has none. */
function userInfoSpan(uri: string): { start: number; at: number } | null {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(uri);
  if (scheme === null) return null;
  const start = scheme[0].length;
  const at = uri.lastIndexOf('@');
  return at < start ? null : { start, at };
}

/** The URI without its password, the user kept (`postgres://u:***@host/db`). */
export function redactUri(uri: string): string {
  const span = userInfoSpan(uri);
  if (span === null) return uri;
  const colon = uri.indexOf(':', span.start);
  if (colon === -1 || colon > span.at) return uri;
  return `${uri.slice(0, colon)}:***${uri.slice(span.at)}`;
}

/** The URI without any user info: a token, or user and password (`nats://***@host:4222`). */
export function hideUserInfo(uri: string): string {
  const span = userInfoSpan(uri);
  return span === null ? uri : `${uri.slice(0, span.start)}***${uri.slice(span.at)}`;
}
