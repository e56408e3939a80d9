import { execFile, spawn } from 'node:child_process';

/**
 * The Docker CLI for the image lane (test/images): every call is `docker ARGS` as a user would
 * type it, with its exit code and output; containers and networks are named per run and removed
 * by {@link DockerResources.removeAll}.
 */

export interface DockerRun {
  code: number;
  stdout: string;
  stderr: string;
}

export function docker(args: readonly string[], options: { input?: string; timeoutMs?: number } = {}): Promise<DockerRun> {
  return new Promise((resolve, reject) => {
    const child = execFile('docker', [...args], { maxBuffer: 64 * 1024 * 1024, timeout: options.timeoutMs ?? 600_000, encoding: 'utf8' }, (error, stdout, stderr) => {
      if (error !== null && typeof error.code !== 'number') {
        reject(new Error(`docker ${args.join(' ')}: ${error.message}`));
        return;
      }
      resolve({ code: error === null ? 0 : Number(error.code), stdout, stderr });
    });
    child.stdin?.end(options.input ?? '');
  });
}

/** `docker ARGS`, failing with its stderr unless it exits 0; returns stdout trimmed. */
export async function dockerOk(args: readonly string[], options: { input?: string; timeoutMs?: number } = {}): Promise<string> {
  const run = await docker(args, options);
  if (run.code !== 0) throw new Error(`docker ${args.join(' ')} exited ${run.code}: ${run.stderr.trim().slice(-2000)}`);
  return run.stdout.trim();
}

/** Whether a Docker engine answers. */
export function dockerAvailable(): Promise<boolean> {
  return docker(['version', '--format', '{{.Server.Version}}'], { timeoutMs: 15_000 }).then(
    (run) => run.code === 0,
    () => false,
  );
}

/** Runs a command, streaming its output to this process's (a build takes minutes), and returns what it printed. */
export function runStreaming(command: string, args: readonly string[], env: NodeJS.ProcessEnv, cwd: string): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, [...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: string[] = [];
    child.stdout.on('data', (chunk: Buffer) => {
      out.push(chunk.toString('utf8'));
      process.stdout.write(chunk);
    });
    child.stderr.on('data', (chunk: Buffer) => process.stderr.write(chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, stdout: out.join('') }));
  });
}

export async function sleep(ms: number): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `probe` until it returns a value other than undefined, or fails after `timeoutMs` saying what it waited for. */
export async function waitFor<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>, everyMs = 500): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown = null;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    await sleep(everyMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last === null ? '' : ` (last error: ${last instanceof Error ? last.message : String(last)})`}`);
}

/** The host address of a container's published port (`docker port`). */
export async function publishedPort(container: string, port: number): Promise<string> {
  const line = (await dockerOk(['port', container, `${port}/tcp`])).split('\n')[0] ?? '';
  const match = /:(\d+)$/.exec(line);
  if (match === null) throw new Error(`${container} publishes no ${port}/tcp: ${line}`);
  return `127.0.0.1:${match[1]}`;
}

/** The container's health as its HEALTHCHECK reports it (starting, healthy, unhealthy), with the last probe's output. */
export async function health(container: string): Promise<{ status: string; lastOutput: string }> {
  const text = await dockerOk(['inspect', '-f', '{{json .State.Health}}', container]);
  const parsed = JSON.parse(text) as { Status: string; Log?: Array<{ Output: string }> } | null;
  return { status: parsed?.Status ?? 'none', lastOutput: parsed?.Log?.at(-1)?.Output.trim() ?? '' };
}

/** Names made for one run, removed together at the end. */
export class DockerResources {
  readonly prefix: string;
  readonly #containers = new Set<string>();
  readonly #networks = new Set<string>();

  constructor(prefix: string) {
    this.prefix = prefix;
  }

  container(role: string): string {
    const name = `${this.prefix}-${role}`;
    this.#containers.add(name);
    return name;
  }

  network(): string {
    const name = `${this.prefix}-net`;
    this.#networks.add(name);
    return name;
  }

  async removeAll(): Promise<void> {
    for (const name of this.#containers) await docker(['rm', '-f', '-v', name]).catch(() => undefined);
    for (const name of this.#networks) await docker(['network', 'rm', name]).catch(() => undefined);
  }
}
