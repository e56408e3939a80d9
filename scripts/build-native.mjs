#!/usr/bin/env node
// Builds native/malloc-trim.c into native/build/malloc-trim.node with the system C compiler and
// Node's own headers (no node-gyp, no download). Optional: when there is no compiler or no
// headers, it says so and exits 0; Shoal then falls back to MALLOC_TRIM_THRESHOLD_=0
// (adapters/runtime/native-memory.ts says why the addon is worth having).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const source = join(root, 'native', 'malloc-trim.c');
const target = join(root, 'native', 'build', 'malloc-trim.node');

function warn(message) {
  process.stderr.write(`shoal: native addon not built (${message}); freed model memory is returned with MALLOC_TRIM_THRESHOLD_=0 instead, about 20 % slower inference\n`);
}

function headers() {
  const candidates = [
    process.env.npm_config_nodedir && join(process.env.npm_config_nodedir, 'include', 'node'),
    join(dirname(dirname(process.execPath)), 'include', 'node'),
    '/usr/include/node',
    '/usr/local/include/node',
  ].filter(Boolean);
  return candidates.find((dir) => existsSync(join(dir, 'node_api.h'))) ?? null;
}

function build() {
  if (process.platform !== 'linux') return; // malloc_trim is glibc's; elsewhere there is nothing to build.
  if (existsSync(target) && statSync(target).mtimeMs >= statSync(source).mtimeMs) return;
  const include = headers();
  if (include === null) return warn("Node's headers (node_api.h) were not found; set npm_config_nodedir");
  const compiler = process.env.CC ?? 'cc';
  mkdirSync(dirname(target), { recursive: true });
  const result = spawnSync(compiler, ['-O2', '-Wall', '-shared', '-fPIC', `-I${include}`, source, '-o', target], { encoding: 'utf8' });
  if (result.error !== undefined) return warn(`${compiler}: ${result.error.message}`);
  if (result.status !== 0) return warn(`${compiler} failed: ${result.stderr.trim()}`);
}

build();
