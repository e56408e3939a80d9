import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { adoptEarlyThread, settleEarlyThreads, startEarlyThreads } from '../../../../adapters/model-threads/early-threads.js';
import { ModelThreads, ModelWorker } from '../../../../adapters/model-threads/model-worker.js';
import { PrepPool } from '../../../../adapters/model-threads/prep-pool.js';
import { resolveRuntimeOptions } from '../../../../adapters/runtime/runtime-options.js';
import { ImagePolicy } from '../../../../adapters/sources/image-input.js';
import { FIXTURES_DIR, REPO_ROOT } from '../../../helpers/shared.js';

/**
 * The threads bin/shoal.js starts before the CLI's modules load (early-threads.ts): the engine's
 * first model thread and first prep thread are those, and they work like threads it started
 * itself; the prep thread, started without an image policy, gets the pool's before any request.
 */

const threads = new ModelThreads(0);
// A policy unlike the default (10 MB), so that the prep thread visibly applies this one.
const MAX_IMAGE_BYTES = 64;
const prep = new PrepPool({ imagePolicy: ImagePolicy.parse({ maxBytes: MAX_IMAGE_BYTES }) });
afterAll(async () => {
  await threads.close();
  await prep.close();
});

describe('early threads', () => {
  it('are adopted once each by the first model and prep threads, which then encode as usual', async () => {
    startEarlyThreads();
    const model = join(FIXTURES_DIR, 'models', 'tiny-bert-mean');
    // PrepPool's first thread is the early prep thread; its first request is the image policy.
    const profile = await prep.describe('bert', model, {});
    expect(adoptEarlyThread('prep')).toBeNull();
    const thread = await threads.take('bert');
    expect(adoptEarlyThread('model')).toBeNull();
    const { worker } = await ModelWorker.start(profile, resolveRuntimeOptions({ intraOpThreads: 1 }), thread);
    try {
      const prepared = await prep.prepare(profile, { task: 'encode', items: [{ text: 'an early start', role: 'document' }], maxLength: profile.maxLength });
      const { outputs } = await worker.run(prepared, { outputs: ['dense'] });
      const dense = outputs[0]?.dense;
      expect(dense).toBeInstanceOf(Float32Array);
      expect(dense?.length).toBeGreaterThan(0);
    } finally {
      await worker.close();
    }
  }, 60_000);

  it('apply the image policy sent after start: an image over its byte limit is refused', async () => {
    const clip = await prep.describe('clip', join(FIXTURES_DIR, 'models', 'tiny-clip'), {});
    const bytes = new Uint8Array(MAX_IMAGE_BYTES + 1).fill(1);
    await expect(prep.prepare(clip, { task: 'encode', items: [{ text: '', image: { kind: 'bytes', bytes }, role: 'document' }], maxLength: clip.maxLength })).rejects.toMatchObject({
      code: 'INPUT_TOO_LARGE',
      message: expect.stringContaining(`limit of ${MAX_IMAGE_BYTES} bytes`),
    });
  }, 60_000);

  it('not adopted, are stopped once their modules are loaded, and a process that exits right after start exits cleanly', async () => {
    // What a usage error does: bin/shoal.js starts the threads, the command fails at once, the
    // CLI settles them and exits. Exiting while a thread was still loading onnxruntime aborted
    // the process (no exit status) on a busy machine.
    const script = [
      "import { settleEarlyThreads, startEarlyThreads } from './adapters/model-threads/early-threads.ts';",
      'startEarlyThreads();',
      'const started = performance.now();',
      'await settleEarlyThreads();',
      "process.stdout.write(String(performance.now() - started));",
      'process.exit(2);',
    ].join('\n');
    for (let run = 0; run < 3; run++) {
      const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: REPO_ROOT, encoding: 'utf8', timeout: 60_000 });
      expect(child.signal, child.stderr).toBeNull();
      expect(child.status, child.stderr).toBe(2);
      expect(child.stderr).not.toContain('terminate called');
      // It waited for the threads' imports (onnxruntime, tokenizers), which take a while.
      expect(Number(child.stdout)).toBeGreaterThan(20);
    }
    startEarlyThreads();
    await settleEarlyThreads();
    expect(adoptEarlyThread('model')).toBeNull();
    expect(adoptEarlyThread('prep')).toBeNull();
  }, 120_000);

  it('give nothing when none were started', () => {
    expect(adoptEarlyThread('model')).toBeNull();
    expect(adoptEarlyThread('prep')).toBeNull();
  });
});
