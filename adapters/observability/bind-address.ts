/**
 * Bind addresses of the HTTP ports Shoal opens (the gateway's, the worker's and the sink's
 * metrics ports): each listens on loopback unless configured otherwise, and each warns when it is
 * bound to an address other machines can reach without authentication.
 */

/** The default bind of every port: this machine only. */
export const LOOPBACK_HOST = '127.0.0.1';

/** Whether `host` only accepts connections from this machine. */
export function isLoopback(host: string): boolean {
  const h = host.trim().toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h);
}
