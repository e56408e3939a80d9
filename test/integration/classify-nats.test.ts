import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Classification } from '../../adapters/protocol/classify.js';
import { loadTaxonomyFile } from '../../adapters/taxonomy/index.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { FIXTURE_MODELS_DIR, TINY_CROSS, TINY_MEAN, startTestWorker, uniquePrefix } from '../helpers/nats-worker.js';
import { DATA_DIR, sharedAvailable } from '../helpers/shared.js';
import { parseJsonl, runShoal } from '../helpers/shoal-cli.js';

/**
 * `shoal classify --nats --coordinate`: the products (and the categories) are embedded by a worker
 * process's engine through JetStream jobs, retrieval runs in the CLI; the output must be
 * identical, line for line, to the in-process run on the same products, taxonomy and model (and
 * with a rerank). Classification jobs (`--nats` alone) are tested by classify-jobs-cli.test.ts;
 * both refuse a model no worker serves at once.
 */

const PRODUCTS = join(DATA_DIR, 'products', 'flipkart-1050.jsonl');
const GOOGLE = join(DATA_DIR, 'taxonomy', 'google-taxonomy-with-ids.en-US.txt');
const available = natsServerAvailable() && sharedAvailable(PRODUCTS) && sharedAvailable(GOOGLE);

describe.skipIf(!available)(`shoal classify --nats --coordinate ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let worker: ShoalWorker;
  const prefix = uniquePrefix('classify');
  const dir = mkdtempSync(join(tmpdir(), 'shoal-classify-nats-'));
  const catalog = join(dir, 'products.jsonl');

  beforeAll(async () => {
    server = await startNatsServer();
    worker = await startTestWorker(server.url, prefix, { models: [TINY_MEAN, TINY_CROSS] });
    writeFileSync(catalog, readFileSync(PRODUCTS, 'utf8').split('\n').slice(0, 120).join('\n'));
  });

  afterAll(async () => {
    await worker?.drain();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const classify = async (name: string, extra: readonly string[], cache: string): Promise<Classification[]> => {
    const out = join(dir, `${name}.jsonl`);
    const run = await runShoal(
      ['classify', catalog, '--taxonomy', GOOGLE, '--model', TINY_MEAN, '--id-field', 'uniq_id', '--top-k', '3', '--out', out, '--chunk-lines', '32', ...extra],
      { env: { SHOAL_MODEL_DIR: FIXTURE_MODELS_DIR, SHOAL_CACHE_DIR: join(dir, cache) } },
    );
    expect(run.stderr).toContain('classified 120 products');
    expect(run.code).toBe(0);
    return parseJsonl(readFileSync(out, 'utf8'), Classification);
  };

  /**
   * Line for line the same decisions; scores may differ in the last float32 digits (the vectors
   * come from other batches on the worker), so candidates whose scores tie within 1e-5 may swap
   * places (also with a candidate just past the last place): there only the score is compared,
   * every other place by id.
   */
  const expectSameClassifications = (remote: Classification[], local: Classification[]): void => {
    expect(remote.map((line) => line.id)).toEqual(local.map((line) => line.id));
    local.forEach((want, index) => {
      const got = remote[index] as Classification;
      expect(got.decided_by).toBe(want.decided_by);
      expect(got.needs_review).toBe(want.needs_review);
      expect(Math.abs(got.score - want.score)).toBeLessThan(1e-5);
      const ranked = (line: Classification) => [{ id: line.category.id, score: line.score }, ...line.alternatives.map((a) => ({ id: a.id, score: a.score }))];
      const a = ranked(got);
      const b = ranked(want);
      expect(a.length).toBe(b.length);
      b.forEach((entry, at) => {
        expect(Math.abs((a[at]?.score ?? Number.NaN) - entry.score)).toBeLessThan(1e-5);
        const tied = b.filter((other) => Math.abs(other.score - entry.score) < 1e-5).map((other) => other.id);
        // The last place may also tie with a candidate just past the list (not listed locally).
        if (tied.length === 1 && at < b.length - 1) expect(a[at]?.id).toBe(entry.id);
        else if (a[at]?.id !== entry.id) expect(tied.length > 1 || at === b.length - 1).toBe(true);
      });
    });
  };

  it('gives the same lines as in process, retrieval only and with a cross-encoder rerank', async () => {
    const taxonomy = await loadTaxonomyFile(GOOGLE);
    for (const [name, extra] of [
      ['retrieve', []],
      ['rerank', ['--rerank-model', TINY_CROSS, '--rerank-top', '8']],
    ] as const) {
      const local = await classify(`${name}-local`, extra, 'cache-local');
      const remote = await classify(`${name}-nats`, [...extra, '--nats', server.url, '--coordinate', '--prefix', prefix, '--part-items', '16'], 'cache-nats');
      expect(local).toHaveLength(120);
      expectSameClassifications(remote, local);
      for (const line of local) {
        expect(taxonomy.byId.has(line.category.id)).toBe(true);
        expect(line.decided_by).toBe(name);
      }
    }
  }, 240_000);

  it('refuses at once a model no worker serves (it waited an hour for a worker), coordinating or as classification jobs', async () => {
    for (const mode of [['--coordinate'], []]) {
      const started = Date.now();
      const run = await runShoal(['classify', catalog, '--taxonomy', GOOGLE, '--model', 'no-such-encoder', '--nats', server.url, '--prefix', prefix, ...mode], {
        env: { SHOAL_MODEL_DIR: FIXTURE_MODELS_DIR, SHOAL_CACHE_DIR: join(dir, 'cache-missing') },
      });
      expect(run.stderr).toContain('no worker serves model "no-such-encoder"');
      expect(run.stderr).toContain(TINY_MEAN);
      expect(run.code).not.toBe(0);
      expect(Date.now() - started).toBeLessThan(30_000);
    }
  }, 90_000);
});
