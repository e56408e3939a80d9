import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { REPO_ROOT } from '../helpers/shared.js';

/**
 * docker-compose.yml as Compose itself reads it: `docker compose config` (v2) or Debian's
 * `docker-compose config` (v1, apt `docker-compose`), whichever is installed (no Docker engine
 * needed). The Shoal services run the image the image lane builds (`SHOAL_IMAGE`, default
 * `shoal:cpu`: scripts/images/build-images.sh), and every other service's registry image is listed
 * in docs/deploy.md, which says which a machine without registry access lacks.
 */

function composeCommand(): string[] | null {
  if (spawnSync('docker', ['compose', 'version'], { encoding: 'utf8' }).status === 0) return ['docker', 'compose'];
  return ['/usr/bin/docker-compose', '/usr/local/bin/docker-compose'].map((bin) => [bin]).find(([bin]) => existsSync(bin ?? '')) ?? null;
}
const COMPOSE = composeCommand();
const SKIP = COMPOSE === null ? 'skipped: neither `docker compose` nor `docker-compose` is installed (apt-get install docker-compose)' : '';

const Config = z.looseObject({ services: z.record(z.string(), z.looseObject({ image: z.string().optional(), build: z.looseObject({ dockerfile: z.string() }).optional() })) });

function config(env: Record<string, string> = {}): z.infer<typeof Config> {
  const [bin = '', ...args] = COMPOSE ?? [];
  const result = spawnSync(bin, [...args, '-f', join(REPO_ROOT, 'docker-compose.yml'), 'config'], { cwd: REPO_ROOT, encoding: 'utf8', env: { ...process.env, ...env } });
  expect(result.status, result.stderr).toBe(0);
  return Config.parse(parse(result.stdout));
}

describe.skipIf(COMPOSE === null)(`docker-compose.yml through ${COMPOSE?.join(' ') ?? 'compose'} config ${SKIP}`, () => {
  it('is valid, and its Shoal services run the image SHOAL_IMAGE names (default shoal:cpu, the lane\'s)', () => {
    const shoal = (c: z.infer<typeof Config>): string[] => Object.entries(c.services).filter(([, s]) => s.build?.dockerfile === 'deploy/docker/Dockerfile').map(([name, s]) => `${name}=${s.image ?? ''}`).sort();
    expect(shoal(config())).toEqual(['gateway=shoal:cpu', 'sink=shoal:cpu', 'worker-text=shoal:cpu', 'worker-vision=shoal:cpu']);
    expect(shoal(config({ SHOAL_IMAGE: 'registry.example/shoal:1.2.3' }))).toEqual(['gateway', 'sink', 'worker-text', 'worker-vision'].map((n) => `${n}=registry.example/shoal:1.2.3`));
    const build = readFileSync(join(REPO_ROOT, 'scripts', 'images', 'build-images.sh'), 'utf8');
    expect(build).toContain('IMAGE="${SHOAL_IMAGE:-shoal:cpu}"');
  });

  it('every other service\'s registry image is listed in docs/deploy.md', () => {
    const others = Object.values(config().services).filter((s) => s.build === undefined).map((s) => s.image ?? '');
    expect(others.length).toBeGreaterThanOrEqual(5);
    const deploy = readFileSync(join(REPO_ROOT, 'docs', 'deploy.md'), 'utf8');
    for (const image of others) expect(deploy, image).toContain(`\`${image}\``);
  });
});
