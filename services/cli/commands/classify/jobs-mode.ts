import { randomUUID } from 'node:crypto';
import { dirname } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { connectNats, redacted } from '../../../../adapters/nats/connection/connection.js';
import { DISCOVERY_STALL_MS, NatsEngine } from '../../../../adapters/nats/rpc/engine-client.js';
import { JobsClient } from '../../../../adapters/nats/jobs/jobs-client.js';
import { servedModelGate } from '../../../../adapters/nats/jobs/model-gate.js';
import type { TopologySettingsInput } from '../../../../adapters/nats/connection/topology.js';
import type { ClassifyMethod } from '../../../../adapters/protocol/classify.js';
import type { ClassifyChunkItem, ClassifyJobRecord } from '../../../../adapters/protocol/classify-jobs.js';
import { ErrorCode, isErrorCode, ShoalError, toShoalError } from '../../../../adapters/protocol/errors.js';
import type { Taxonomy } from '../../../../adapters/taxonomy/index.js';
import type { Evaluator } from '../../../../pipelines/classify/index.js';
import { ClassifyProducer } from '../../../../pipelines/classify/classify-producer.js';
import type { CliApp } from '../../app.js';
import type { LineOutput } from '../../jsonl.js';
import { printable } from '../../printable.js';
import { hasProductText, textFieldNames, type ProductRecord } from './products.js';
import { ClassifyBar } from './progress.js';
import { gold, noTextError, NO_TEXT_WARNINGS, productId, toItem, type GoldSeen } from './run.js';

/**
 * `shoal classify CATALOG --taxonomy FILE --nats URL`: the catalog as classification jobs
 * (docs/classify.md, "Over NATS"). This process is a producer, not a coordinator: it checks the
 * catalog as in process (fields, ids, products without text become error lines in their place),
 * publishes it in chunks with the method (pipelines/classify/classify-producer.ts), and, unless
 * `--detach`, follows the run's status and writes its results (read back from the run's target,
 * in catalog order) as an in-process run would: `--out FILE` (FILE.partial until done) or stdout.
 * `shoal worker --classify` processes do the work; stopping this process stops only the watching.
 */

export interface ClassifyJobsCall {
  app: CliApp;
  nats: readonly string[];
  /** --prefix (else SHOAL_SUBJECT_PREFIX). */
  prefix: string | undefined;
  request: ClassifyMethod;
  /** Models checked against the workers before anything is published. */
  models: { encode: readonly string[]; score: readonly string[] };
  products: AsyncIterable<ProductRecord[]>;
  taxonomy: Taxonomy;
  fields: readonly string[];
  template: string | undefined;
  idField: string;
  goldField: string | undefined;
  evaluator: Evaluator | null;
  /** Where the results go (`--result`); default the object store. */
  result: string | undefined;
  /** Products per chunk message (--chunk-lines). */
  chunkItems: number;
  detach: boolean;
  /** Null with --detach. */
  sink: LineOutput | null;
  barsEnabled: boolean;
  log: (line: string) => void;
  warn: (line: string) => void;
}

export interface ClassifyJobsOutcome {
  /** Lines written (every product). */
  lines: number;
  /** Products without text (error lines). */
  failed: number;
}

/** How long a run may show no progress before the producer checks that a classify worker pulls. */
const NO_WORKER_WARNING_MS = 5000;
const WRITE_LINES = 256;

async function checkModels(nc: Awaited<ReturnType<typeof connectNats>>, topology: TopologySettingsInput, models: ClassifyJobsCall['models']): Promise<void> {
  // A model no worker serves (or served) is refused at once, instead of a run that waits for one.
  const discovery = new NatsEngine(nc, topology);
  try {
    const jobs = await JobsClient.open(nc, { topology, modelGate: (t) => servedModelGate({ topology: t, discover: () => discovery.workers(500, DISCOVERY_STALL_MS) }) });
    for (const model of models.encode) await jobs.checkModel('encode', model);
    for (const model of models.score) await jobs.checkModel('score', model);
  } finally {
    await discovery.close();
  }
}

export async function classifyAsJobs(call: ClassifyJobsCall): Promise<ClassifyJobsOutcome | null> {
  const { app } = call;
  const nc = await connectNats({ ...app.settings.nats, servers: [...call.nats], retryFirstConnect: false, name: 'shoal classify' });
  try {
    // The prefix (--prefix, else SHOAL_SUBJECT_PREFIX) and the replicas of what is created (SHOAL_STREAM_REPLICAS).
    const topology = app.settings.topology(call.prefix);
    await checkModels(nc, topology, call.models);
    // The results are read back from the target: a file:// one named here is this user's to read.
    const roots = [...(app.settings.fileRoots), ...(call.result?.startsWith('file://') === true ? [dirname(fileURLToPath(call.result))] : [])];
    const producer = await ClassifyProducer.open(nc, topology, { fileRoots: roots, s3: app.settings.s3 });
    try {
      return await produceAndFollow(call, producer);
    } finally {
      producer.close();
    }
  } finally {
    await nc.drain().catch(() => nc.close());
  }
}

async function produceAndFollow(call: ClassifyJobsCall, producer: ClassifyProducer): Promise<ClassifyJobsOutcome | null> {
  const { app } = call;
  if (call.result !== undefined) await producer.checkTarget(call.result);
  const runId = randomUUID();
  const goldSeen: GoldSeen = { values: 0, unknown: 0, example: '' };
  /** Per product, its gold path (with --gold): evaluated against the results once they are read back. */
  const truths: (string[] | null)[] = [];
  let failed = 0;
  const spec = { fields: call.fields, template: call.template };
  const options = { ...spec, idField: call.idField, imageField: undefined, goldField: call.goldField, taxonomy: call.taxonomy };
  async function* items(): AsyncGenerator<ClassifyChunkItem> {
    for await (const records of call.products) {
      // Ctrl-C while publishing: the run could never be whole, so it is failed below with why.
      if (app.io.signal.aborted) throw new ShoalError(ErrorCode.CANCELLED, 'interrupted while publishing the catalog');
      for (const record of records) {
        if (call.evaluator !== null) truths.push(gold(record, options, goldSeen));
        if (hasProductText(record.fields, spec)) {
          yield toItem(record, options);
          continue;
        }
        failed += 1;
        if (failed <= NO_TEXT_WARNINGS) {
          call.warn(`product ${JSON.stringify(productId(record, call.idField))} (record ${record.number}) has no text in ${textFieldNames(spec).join(', ')}: written as an error line, not classified${failed === NO_TEXT_WARNINGS ? ' (further ones are only counted)' : ''}`);
        }
        yield noTextError(record, options);
      }
    }
  }
  call.log(`classify run ${runId} over ${redacted([...call.nats])}: publishing the catalog on ${producer.names.chunks} for \`shoal worker --classify\``);
  let published;
  try {
    published = await producer.publish({ runId, request: call.request, items: items(), chunkItems: call.chunkItems, ...(call.result === undefined ? {} : { result: call.result }) });
  } catch (error) {
    // A bad line mid-catalog, or Ctrl-C: the chunks published so far can never make a whole run.
    const shoal = toShoalError(error);
    await producer.abandon(runId, { code: shoal.code === ErrorCode.CANCELLED ? ErrorCode.CANCELLED : ErrorCode.INVALID_INPUT, message: `the producer stopped before the end of the catalog: ${shoal.message}` }).catch(() => undefined);
    throw error;
  }
  call.log(`classify run ${runId}: ${published.items} products in ${published.chunks} chunks published; results go to ${published.result}`);
  if (call.detach) {
    app.io.stdout.write(`${runId}\n`);
    call.log(`follow it with GET /v1/jobs/${runId} on a gateway with SHOAL_CLASSIFY_JOBS=1; its results: ${published.result}`);
    return null;
  }
  const record = await follow(call, producer, runId, published.items);
  if (record === null || (record.state !== 'completed' && record.state !== 'failed')) {
    app.io.stderr.write(`only the watching stopped; the workers go on with run ${runId} (its results: ${published.result})\n`);
    throw new ShoalError(ErrorCode.CANCELLED, `interrupted: only the watching stopped; the workers go on with run ${runId}`);
  }
  if (record.state === 'failed') {
    const cause = record.error ?? { code: ErrorCode.INTERNAL, message: 'no reason recorded' };
    throw new ShoalError(isErrorCode(cause.code) ? cause.code : ErrorCode.INTERNAL, `classify run ${runId} failed: ${cause.message}`, { details: { run_id: runId } });
  }
  const lines = await writeResults(call, producer, record, truths);
  if (goldSeen.unknown > 0) {
    call.warn(`--gold ${call.goldField ?? ''}: ${goldSeen.unknown} of ${goldSeen.values} values name no category of the taxonomy (e.g. ${JSON.stringify(goldSeen.example)}); they count as misses at every level`);
  }
  return { lines, failed };
}

/** The run's status until it ends, with the bar over its products and a warning when no classify worker pulls. */
async function follow(call: ClassifyJobsCall, producer: ClassifyProducer, runId: string, items: number): Promise<ClassifyJobRecord | null> {
  const bar = new ClassifyBar(call.app.io.stderr, call.barsEnabled, items);
  let lastChange = Date.now();
  let warned = false;
  // Not silenced by --quiet: a run that waits for a worker that is not there must say why.
  const check = setInterval(() => {
    if (warned || Date.now() - lastChange < NO_WORKER_WARNING_MS) return;
    void producer.hasWorker().then((present) => {
      if (present || warned) return;
      warned = true;
      call.app.io.stderr.write('warning: no classify worker pulls: the chunks wait in the queue (start `shoal worker --classify`); Ctrl-C stops the watching, not the run\n');
    });
  }, 1000);
  let done = -1;
  try {
    return await producer.follow(runId, {
      signal: call.app.io.signal,
      onStatus: (record) => {
        if (record.items_done !== done) {
          done = record.items_done;
          lastChange = Date.now();
          bar.update(record.items_done, record.items_done);
        }
      },
    });
  } finally {
    clearInterval(check);
    bar.stop();
  }
}

/** The results, from the target to the sink in catalog order, each scored with --gold. */
async function writeResults(call: ClassifyJobsCall, producer: ClassifyProducer, record: ClassifyJobRecord, truths: readonly (string[] | null)[]): Promise<number> {
  const sink = call.sink;
  if (sink === null) return 0;
  const stream = await producer.results(record);
  const lines = createInterface({ input: stream, crlfDelay: Infinity });
  let batch: string[] = [];
  let written = 0;
  try {
    for await (const line of lines) {
      if (line === '') continue;
      if (call.evaluator !== null) score(call, line, truths[written + batch.length] ?? null);
      batch.push(line);
      if (batch.length >= WRITE_LINES) {
        await sink.write(batch);
        written += batch.length;
        batch = [];
      }
    }
    await sink.write(batch);
    written += batch.length;
  } finally {
    lines.close();
    stream.destroy();
  }
  if (written !== record.items_done) throw new ShoalError(ErrorCode.INTERNAL, `the results of run ${record.job_id} (${printable(record.result)}) have ${written} lines for ${record.items_done} products`);
  return written;
}

function score(call: ClassifyJobsCall, line: string, truth: string[] | null): void {
  if (truth === null || call.evaluator === null) return;
  const value = JSON.parse(line) as { category?: { id?: unknown } };
  const id = value.category?.id;
  const index = typeof id === 'string' ? call.taxonomy.byId.get(id) : undefined;
  if (index !== undefined) call.evaluator.add(call.taxonomy.categories[index]?.path ?? [], truth);
}
