import type { ShoalSettings } from '../../settings/shoal-settings.js';
import type { Command } from 'commander';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { DataRef, IndexName, JobId, PrimitiveSchema, type JobStatus, type ResultTarget } from '../../../adapters/protocol/jobs.js';
import { ImageSource, ItemId, ModelRef, Role, TextItem } from '../../../adapters/protocol/requests.js';
import { PRIMITIVES } from '../../../adapters/protocol/subjects.js';
import type { CliApp } from '../app.js';
import { openSource, readLineChunks } from '../jsonl.js';
import { addLineFieldOptions, LineFieldFlags } from '../line-fields.js';
import { parseLine, type LinePrepare } from '../line-stream.js';
import { CommaListFlag, NatsUrlsFlag, PositiveIntFlag, parseFlags } from '../line-options.js';

/**
 * `shoal submit <primitive>`: publishes one asynchronous job to NATS JetStream from JSON Lines
 * items (`{"id","text"}` or `{"id","image"}`), prints `{"job_id","parts","items","state"}`, and
 * with --wait waits for the job to finish and prints its final status. Workers (`shoal worker`)
 * do the work; results land on the results stream, or under --result-uri.
 */

const SubmitLine = z.union([
  z.object({ id: ItemId.optional(), text: TextItem.shape.text, role: Role.optional() }),
  z.object({ id: ItemId.optional(), image: ImageSource, role: Role.optional() }),
]);
type SubmitLine = z.infer<typeof SubmitLine>;

const JsonObject = z
  .string()
  .transform((text, ctx) => {
    try {
      const value: unknown = JSON.parse(text);
      return value;
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be a JSON object' });
      return z.NEVER;
    }
  })
  .pipe(z.record(z.string(), z.unknown()));

const SubmitFlags = z.strictObject({
  ...LineFieldFlags,
  model: ModelRef,
  input: z.string().min(1).optional(),
  query: z.string().optional(),
  labels: CommaListFlag.optional(),
  options: JsonObject.optional(),
  jobId: JobId.optional(),
  partItems: PositiveIntFlag(100_000).optional(),
  resultUri: DataRef.optional(),
  resultIndex: IndexName.optional(),
  vectors: z.enum(['f32', 'json'], { error: '--vectors is f32 or json' }).optional(),
  wait: z.boolean().optional(),
  timeout: PositiveIntFlag(86_400_000).optional(),
  nats: NatsUrlsFlag.optional(),
  prefix: z.string().min(1).optional(),
});

const EXAMPLE = `
Input lines: {"id": "a", "text": "..."} (or {"id": "a", "image": "path-or-url"}), one item each.

Examples:
  $ shoal submit encode --model sentence-transformers/all-MiniLM-L6-v2 -i docs.jsonl --wait
  $ shoal submit score --model cross-encoder/ms-marco-MiniLM-L6-v2 --query "what is nats" -i passages.jsonl
  $ shoal submit extract --model urchade/gliner_small-v2.1 --labels person,organization -i news.jsonl \\
      --result-uri obj://shoal_payloads/results
  $ shoal submit encode --model BAAI/bge-m3 --options '{"output_types":["dense","sparse"]}' -i docs.jsonl
  $ shoal submit encode --model BAAI/bge-small-en-v1.5 --id-field _id --template '{title}. {text}' -i corpus.jsonl

Items keep their id (or --id-field's, else their line number) into the results.`;

/**
 * The items of the input, each with its id: the line's own (or --id-field's), else its line
 * number, as the line commands number theirs, so results can always be matched to input lines.
 */
async function readItems(app: CliApp, input: string | undefined, prepare: LinePrepare): Promise<SubmitLine[]> {
  const source = await openSource(input, app.io.stdin);
  const items: SubmitLine[] = [];
  try {
    for await (const chunk of readLineChunks(source, 1024)) {
      for (const raw of chunk) {
        if (raw.text.trim() === '') continue;
        const line = parseLine(raw, SubmitLine, source.name, prepare);
        items.push({ ...line.value, id: line.id });
      }
    }
  } finally {
    if (source.name !== 'stdin') source.stream.destroy();
  }
  if (items.length === 0) throw new ShoalError(ErrorCode.INVALID_INPUT, `no items in ${source.name}: give JSON Lines like {"id": 1, "text": "..."}`);
  return items;
}

/** SHOAL_JOB_TIMEOUT_MS and SHOAL_SUBMIT_TIMEOUT_MS, as the gateway reads them; unset ones keep the client's defaults. */
function jobTimeouts(settings: ShoalSettings): { jobTimeoutMs?: number; submitTimeoutMs?: number } {
  const read = (key: 'jobTimeoutMs' | 'submitTimeoutMs', name: string): number | undefined => {
    const value = settings.value(key);
    if (value === undefined) return undefined;
    const parsed = PositiveIntFlag(30 * 86_400_000).safeParse(value);
    if (!parsed.success) throw new ShoalError(ErrorCode.CONFIG_INVALID, `${name}: must be a whole number of milliseconds`);
    return parsed.data;
  };
  const jobTimeoutMs = read('jobTimeoutMs', 'SHOAL_JOB_TIMEOUT_MS');
  const submitTimeoutMs = read('submitTimeoutMs', 'SHOAL_SUBMIT_TIMEOUT_MS');
  return { ...(jobTimeoutMs === undefined ? {} : { jobTimeoutMs }), ...(submitTimeoutMs === undefined ? {} : { submitTimeoutMs }) };
}

function summary(status: JobStatus): string {
  const { job_id, state, parts, parts_done, parts_failed, items, errors } = status;
  return `${JSON.stringify({ job_id, state, parts, parts_done, parts_failed, items, errors })}\n`;
}

/** Where the job's results go: a named index, a store URI, or the results stream (the default). */
function resultTarget(flags: { resultIndex?: string | undefined; resultUri?: string | undefined; vectors?: 'f32' | 'json' | undefined }): ResultTarget {
  if (flags.resultIndex !== undefined) return { kind: 'index', index: flags.resultIndex };
  if (flags.resultUri !== undefined) return { kind: 'store', uri: flags.resultUri };
  return { kind: 'stream', ...(flags.vectors === undefined ? {} : { vectors: flags.vectors }) };
}

export function registerSubmit(program: Command, app: CliApp): void {
  const command = program
    .command('submit')
    .summary('publish an asynchronous job to NATS (done by shoal worker)')
    .description('Publish the JSON Lines items as one job for the workers; print the job id (and, with --wait, the final status).')
    .argument('<primitive>', `one of ${PRIMITIVES.join(', ')}`)
    .requiredOption('-m, --model <model>', 'model the workers serve (catalog name or hub id)')
    .option('-i, --input <file>', 'read JSON Lines items from FILE (default: stdin)')
    .option('--query <text>', 'the query (score)')
    .option('--labels <list>', 'entity types, comma-separated (extract with zero-shot models)')
    .option('--options <json>', 'more request fields as a JSON object, e.g. {"output_types":["sparse"]}')
    .option('--job-id <id>', 'job id (resubmitting the same id adds nothing); default: a random one')
    .option('--part-items <n>', 'items per part (default 64)')
    .option('--result-index <name>', 'encode results into the index SHOAL_INDEXES names so (written by `shoal sink`; docs/storage.md)')
    .option('--result-uri <uri>', 'write results under obj://bucket/prefix, s3://bucket/prefix or file:///dir instead of the results stream')
    .option('--vectors <format>', 'vectors in result stream messages: f32 (packed float32, default) or json (plain numbers)')
    .option('--wait', 'wait until the job finishes and print its final status')
    .option('--timeout <ms>', 'with --wait: give up after this long')
    .option('--nats <urls>', 'NATS server URLs, comma-separated (env NATS_URL; default nats://127.0.0.1:4222)')
    .option('--prefix <prefix>', 'subject prefix (env SHOAL_SUBJECT_PREFIX; default shoal)');
  addLineFieldOptions(command, { text: true })
    .addHelpText('after', EXAMPLE)
    .action(async (primitiveArg: unknown, _options: unknown, self: Command) => {
      const primitive = PrimitiveSchema.safeParse(primitiveArg);
      if (!primitive.success) throw new ShoalError(ErrorCode.INVALID_INPUT, `shoal submit: the primitive must be one of ${PRIMITIVES.join(', ')}`);
      const flags = parseFlags(SubmitFlags, self);
      if (primitive.data === 'score' && flags.query === undefined && flags.options?.query === undefined) {
        throw new ShoalError(ErrorCode.INVALID_INPUT, 'shoal submit score: give --query TEXT');
      }
      if (flags.resultIndex !== undefined && flags.resultUri !== undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, '--result-index and --result-uri are exclusive');
      const items = await readItems(app, flags.input, app.lineFields(self, flags));
      const request: Record<string, unknown> = { ...flags.options, model: flags.model, items };
      if (flags.query !== undefined) request.query = flags.query;
      if (flags.labels !== undefined) request.labels = flags.labels;
      // The NATS clients are loaded here, when a job is submitted, not when the command tree is built.
      const [{ connectNats }, { NatsEngine, DISCOVERY_STALL_MS }, { JobsClient }, { servedModelGate }] = await Promise.all([
        import('../../../adapters/nats/connection/connection.js'),
        import('../../../adapters/nats/rpc/engine-client.js'),
        import('../../../adapters/nats/jobs/jobs-client.js'),
        import('../../../adapters/nats/jobs/model-gate.js'),
      ]);
      const env = app.settings.nats;
      const nc = await connectNats({ ...env, ...(flags.nats === undefined ? {} : { servers: flags.nats }), retryFirstConnect: false, name: 'shoal submit' });
      try {
        const topology = app.settings.topology(flags.prefix);
        // Refuse models no worker serves (or served) before anything is stored: a typo answers MODEL_NOT_FOUND with the served list.
        const discovery = new NatsEngine(nc, { prefix: topology.prefix });
        const client = await JobsClient.open(nc, { topology, ...jobTimeouts(app.settings), s3: app.settings.s3, indexNames: Object.keys(app.settings.indexes ?? {}), modelGate: (t) => servedModelGate({ topology: t, discover: () => discovery.workers(500, DISCOVERY_STALL_MS) }) });
        const submitted = await client.submit({
          primitive: primitive.data,
          request,
          ...(flags.jobId === undefined ? {} : { job_id: flags.jobId }),
          ...(flags.partItems === undefined ? {} : { part_items: flags.partItems }),
          result: resultTarget(flags),
        });
        if (flags.wait !== true) {
          app.io.stdout.write(`${JSON.stringify({ job_id: submitted.job_id, parts: submitted.parts, items: submitted.items, state: submitted.status.state })}\n`);
          return;
        }
        const waitOptions = flags.timeout === undefined ? { signal: app.io.signal } : { signal: app.io.signal, timeoutMs: flags.timeout };
        const final = await client.wait(submitted.job_id, waitOptions);
        app.io.stdout.write(summary(final));
        if (final.state !== 'completed') {
          const first = final.errors[0];
          throw new ShoalError(
            first?.code ?? ErrorCode.INTERNAL,
            `job ${final.job_id} ended ${final.state}: ${final.parts_failed} of ${final.parts} parts failed${first === undefined ? '' : ` (first: ${first.message})`}`,
          );
        }
      } finally {
        await nc.close();
      }
    });
}
