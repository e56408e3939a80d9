import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { EncodeResult } from '../../adapters/protocol/results.js';
import { expectAllClose } from '../helpers/conformance.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { referenceEngine, startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';
import { DATA_DIR, FIXTURES_DIR, missingReason, sharedAvailable } from '../helpers/shared.js';
import { jsonl, parseJsonl, runShoal } from '../helpers/shoal-cli.js';
import { shoalInProcess } from '../helpers/shoal-in-process.js';

/**
 * Issue 16 item 2 (and the positional input file of item 9), on SciFact, whose corpus lines are
 * `{"_id", "title", "text"}`: --id-field keeps the ids, --text-field and --template choose the
 * text, on every line command and through `shoal submit` into the job's results; without
 * --id-field a warning, once, names the flag. Each run is compared with the same command on
 * lines rewritten by hand to the plain `{"id", "text"}` shape. The main paths run `shoal` as a
 * child process; the other cases run the same command tree in process (seconds cheaper each).
 */

const MODELS = join(FIXTURES_DIR, 'models');
const CORPUS = join(DATA_DIR, 'scifact', 'corpus.jsonl');
const N = 12;
const ENV = { SHOAL_MODEL_DIR: MODELS };

const Doc = z.looseObject({ _id: z.string(), title: z.string(), text: z.string() });
const Encoded = z.strictObject({ id: z.union([z.string(), z.number()]), dense: z.array(z.number()), truncated: z.boolean().optional() });
const Tokenized = z.looseObject({ id: z.union([z.string(), z.number()]), tokens: z.array(z.string()) });

let work = '';
let corpus = '';
let docs: z.infer<typeof Doc>[] = [];

beforeAll(() => {
  if (!sharedAvailable(CORPUS)) return;
  work = mkdtempSync(join(tmpdir(), 'shoal-line-fields-'));
  const lines = readFileSync(CORPUS, 'utf8').split('\n').slice(0, N);
  docs = lines.map((line) => Doc.parse(JSON.parse(line)));
  corpus = join(work, 'corpus.jsonl');
  writeFileSync(corpus, `${lines.join('\n')}\n`);
});

afterAll(() => {
  if (work !== '') rmSync(work, { recursive: true, force: true });
});

function write(name: string, lines: readonly unknown[]): string {
  const path = join(work, name);
  writeFileSync(path, jsonl(lines));
  return path;
}

describe.skipIf(!sharedAvailable(CORPUS))('--id-field, --text-field, --template on the line commands (SciFact)', () => {
  if (!sharedAvailable(CORPUS)) it.skip(missingReason(CORPUS), () => undefined);

  it('encode --id-field _id --template "{title}. {text}" equals encoding {"id": _id, "text": title + ". " + text}', async () => {
    const byHand = write('by-hand.jsonl', docs.map((d) => ({ id: d._id, text: `${d.title}. ${d.text}` })));
    const [mapped, reference] = await Promise.all([
      runShoal(['encode', '--model', 'tiny-bert-mean', '--id-field', '_id', '--template', '{title}. {text}', '-i', corpus], { env: ENV }),
      runShoal(['encode', '--model', 'tiny-bert-mean', '-i', byHand], { env: ENV }),
    ]);
    expect(mapped.code, mapped.stderr).toBe(0);
    expect(reference.code, reference.stderr).toBe(0);
    const got = parseJsonl(mapped.stdout, Encoded);
    const want = parseJsonl(reference.stdout, Encoded);
    expect(got.map((l) => l.id)).toEqual(docs.map((d) => d._id));
    got.forEach((line, i) => expectAllClose(line.dense, want[i]?.dense ?? [], 1e-6, String(line.id)));
    // --id-field given: no hint about ids.
    expect(mapped.stderr).not.toContain('warning');
  }, 60_000);

  it('without --id-field: ids are line numbers and one warning names --id-field _id', async () => {
    const run = await shoalInProcess(['encode', '--model', 'tiny-bert-mean', '-i', corpus], { env: ENV });
    expect(run.code, run.stderr).toBe(0);
    expect(parseJsonl(run.stdout, Encoded).map((l) => l.id)).toEqual(docs.map((_, i) => i + 1));
    const warnings = run.stderr.split('\n').filter((l) => l.startsWith('warning:'));
    expect(warnings).toEqual(['warning: line 1 has no "id" but has "_id": ids will be line numbers; pass --id-field _id to keep them (shown once)']);
  }, 60_000);

  it('tokenize --text-field title reads the title; the file may be given as the only argument', async () => {
    const byHand = write('titles.jsonl', docs.map((d) => ({ id: d._id, text: d.title })));
    const [mapped, reference] = await Promise.all([
      shoalInProcess(['tokenize', '--model', 'tiny-bert-mean', '--id-field', '_id', '--text-field', 'title', corpus], { env: ENV }),
      shoalInProcess(['tokenize', '--model', 'tiny-bert-mean', '--input', byHand], { env: ENV }),
    ]);
    expect(mapped.code, mapped.stderr).toBe(0);
    expect(parseJsonl(mapped.stdout, Tokenized)).toEqual(parseJsonl(reference.stdout, Tokenized));
    expect(parseJsonl(mapped.stdout, Tokenized).map((l) => l.id)).toEqual(docs.map((d) => d._id));
  }, 60_000);

  it('extract and score keep --id-field ids', async () => {
    const queries = write('queries.jsonl', [
      { qid: 'q-a', query: 'cerebral white matter', items: ['first passage', 'second passage'] },
      { qid: 'q-b', query: 'newborn', items: ['a', 'b', 'c'] },
    ]);
    const [extract, score] = await Promise.all([
      shoalInProcess(['extract', '--model', 'tiny-ner', '--id-field', '_id', '--text-field', 'title', '-i', corpus], { env: ENV }),
      shoalInProcess(['score', '--model', 'tiny-cross-encoder', '--id-field', 'qid', '-i', queries], { env: ENV }),
    ]);
    expect(extract.code, extract.stderr).toBe(0);
    expect(parseJsonl(extract.stdout, z.looseObject({ id: z.string(), entities: z.array(z.unknown()) })).map((l) => l.id)).toEqual(docs.map((d) => d._id));
    expect(score.code, score.stderr).toBe(0);
    const scored = parseJsonl(score.stdout, z.looseObject({ id: z.string(), scores: z.array(z.looseObject({ index: z.number() })) }));
    expect(scored.map((l) => [l.id, l.scores.length])).toEqual([['q-a', 2], ['q-b', 3]]);
  }, 60_000);

  it('mistakes are exit 2 naming the line and the flag', async () => {
    const missing = write('missing.jsonl', [{ _id: 'x', abstract: 'has an abstract' }, { _id: 'y' }]);
    const [noField, badTemplate, both, twoFiles] = await Promise.all([
      shoalInProcess(['tokenize', '--model', 'tiny-bert-mean', '--text-field', 'abstract', '-i', missing], { env: ENV }),
      shoalInProcess(['tokenize', '--model', 'tiny-bert-mean', '--template', 'no fields here', '-i', corpus], { env: ENV }),
      shoalInProcess(['tokenize', '--model', 'tiny-bert-mean', '--template', '{title}', '--text-field', 'text', '-i', corpus], { env: ENV }),
      shoalInProcess(['tokenize', '--model', 'tiny-bert-mean', corpus, missing], { env: ENV }),
    ]);
    expect([noField.code, noField.stderr]).toEqual([2, expect.stringContaining(`${missing} line 2: no "abstract" field (--text-field abstract)`)]);
    expect(noField.stdout.split('\n').filter((l) => l !== '')).toHaveLength(1);
    expect([badTemplate.code, badTemplate.stderr]).toEqual([2, expect.stringContaining('--template "no fields here" names no field')]);
    expect([both.code, both.stderr]).toEqual([2, expect.stringContaining('--text-field and --template both say where the text comes from')]);
    expect([twoFiles.code, twoFiles.stderr]).toEqual([2, expect.stringContaining('reads one input file (-i/--input FILE, or the file as the only argument)')]);
  }, 60_000);
});

describe.skipIf(!sharedAvailable(CORPUS) || !natsServerAvailable())('shoal submit keeps the ids into the job results', () => {
  if (!natsServerAvailable()) it.skip(NATS_SERVER_MISSING, () => undefined);
  let nats: NatsServerHandle;
  const prefix = uniquePrefix('fields');

  beforeAll(async () => {
    nats = await startNatsServer();
  });
  afterAll(async () => {
    await nats?.stop();
  });

  it('submit encode --id-field _id --template: every result item carries its _id, with the template text vectors', async () => {
    const worker = await startTestWorker(nats.url, prefix);
    const engine = referenceEngine();
    const nc = await testConnection(nats.url);
    try {
      const run = await runShoal(
        ['submit', 'encode', '--model', 'tiny-bert-mean', '--nats', nats.url, '--prefix', prefix, '--id-field', '_id', '--template', '{title}. {text}', '--part-items', '5', '--wait', '-i', corpus],
        { env: ENV },
      );
      expect(run.code, run.stderr).toBe(0);
      const { job_id: jobId, state } = z.looseObject({ job_id: z.string(), state: z.string() }).parse(JSON.parse(run.stdout.trim()));
      expect(state).toBe('completed');
      const jobs = await JobsClient.open(nc, { topology: { prefix } });
      const items: { id: unknown; dense: number[] }[] = [];
      for await (const part of jobs.results(jobId)) {
        for (const item of EncodeResult.parse(part.result).items) items.push({ id: item.id, dense: item.dense ?? [] });
      }
      expect(items.map((i) => i.id)).toEqual(docs.map((d) => d._id));
      const reference = await engine.encode({ model: 'tiny-bert-mean', items: docs.map((d) => `${d.title}. ${d.text}`) });
      items.forEach((item, i) => expectAllClose(item.dense, reference.items[i]?.dense ?? [], 1e-5, String(item.id)));

      // Without --id-field the items are numbered by line, as the line commands number them.
      const plain = await shoalInProcess(['submit', 'encode', '--model', 'tiny-bert-mean', '--nats', nats.url, '--prefix', prefix, '--wait', '-i', corpus], { env: ENV });
      expect(plain.code, plain.stderr).toBe(0);
      expect(plain.stderr).toContain('pass --id-field _id to keep them');
      const plainId = z.looseObject({ job_id: z.string() }).parse(JSON.parse(plain.stdout.trim())).job_id;
      const ids: unknown[] = [];
      for await (const part of jobs.results(plainId)) for (const item of EncodeResult.parse(part.result).items) ids.push(item.id);
      expect(ids).toEqual(docs.map((_, i) => i + 1));
    } finally {
      await nc.close();
      await engine.close();
      await worker.close();
    }
  }, 90_000);
});
