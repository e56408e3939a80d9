// The image's HEALTHCHECK: asks the running Shoal role for its /readyz, whichever role it is.
// The gateway answers on SHOAL_PORT / --port (8080); a worker or sink answers on its metrics port
// (--metrics-port / SHOAL_METRICS_PORT) when it opened one. A role that serves no HTTP port (a
// worker without metrics, `shoal ingest`, …) has nothing to ask, so a running process is healthy.
// Exit status: 0 healthy, 1 not (Docker's convention). Plain Node, no dependencies: it runs as the
// container's user with a read-only root filesystem.
import { readdirSync, readFileSync } from 'node:fs';

// The image's entry script; another path only for tests (test/deploy/image-files.test.ts).
const ENTRY = process.env.SHOAL_HEALTHCHECK_ENTRY ?? '/app/bin/shoal.js';
const TIMEOUT_MS = 4000;

/** argv of the Shoal process in this container (PID 1, or a child of an init such as tini). */
function shoalArgv() {
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name) && Number(name) !== process.pid)) {
    let argv;
    try {
      argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter((arg) => arg !== '');
    } catch {
      continue; // exited meanwhile, or not ours to read
    }
    const at = argv.indexOf(ENTRY);
    if (at >= 0) return argv.slice(at + 1);
  }
  return null;
}

/** The value of --name VALUE or --name=VALUE, the last one given. */
function flag(argv, name) {
  let value;
  argv.forEach((arg, i) => {
    if (arg === name) value = argv[i + 1];
    else if (arg.startsWith(`${name}=`)) value = arg.slice(name.length + 1);
  });
  return value;
}

/** The readiness URL on the address the role listens on (loopback for a wildcard address). */
function readyz(bound, port) {
  const host = bound === undefined || bound === '' || bound === '0.0.0.0' || bound === '::' ? '127.0.0.1' : bound;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}/readyz`;
}

/** The readiness URL of this role, or null when it serves none. */
function readinessUrl(argv) {
  const role = argv.find((arg) => !arg.startsWith('-'));
  const env = process.env;
  if (role === 'gateway') {
    const port = flag(argv, '--port') ?? env.SHOAL_PORT ?? '8080';
    return readyz(flag(argv, '--host') ?? env.SHOAL_HOST, port);
  }
  if (role === 'worker' || role === 'sink') {
    const port = flag(argv, '--metrics-port') ?? env.SHOAL_METRICS_PORT;
    if (port === undefined || port === '') return null;
    return readyz(flag(argv, '--metrics-host') ?? env.SHOAL_METRICS_HOST, port);
  }
  return null;
}

const argv = shoalArgv();
if (argv === null) {
  console.error(`no process runs ${ENTRY}`);
  process.exit(1);
}
const url = readinessUrl(argv);
if (url === null) process.exit(0);
try {
  const response = await fetch(url, { signal: AbortSignal.timeout(TIMEOUT_MS) });
  if (!response.ok) console.error(`${url}: HTTP ${response.status}`);
  process.exit(response.ok ? 0 : 1);
} catch (error) {
  console.error(`${url}: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
