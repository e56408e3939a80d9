import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { z } from 'zod';
import type { Engine } from '../../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError, toShoalError } from '../../../adapters/protocol/errors.js';
import { ModelRef } from '../../../adapters/protocol/requests.js';
import { ClassifyResultTarget, type ClassifyMethod } from '../../../adapters/protocol/classify.js';
import { loadTaxonomyFile } from '../../../adapters/taxonomy/index.js';
import { Evaluator, TaxonomyClassifier } from '../../../pipelines/classify/index.js';
import type { CliApp } from '../app.js';
import { openLineOutput, openSource } from '../jsonl.js';
import { addImageOptions, CommaListFlag, ImageFlags, imagePolicyFromFlags, NatsUrlsFlag, parseFlags, PositiveIntFlag } from '../line-options.js';
import { catalogFormat, FIELD_CHECK_RECORDS, readCheckedProducts, readProducts, textFlag, type ProductRecord } from './classify/products.js';
import { ClassifyBar } from './classify/progress.js';
import { evaluationJson, evaluationTable } from './classify/report.js';
import { runClassify } from './classify/run.js';

/**
 * `shoal classify CATALOG --taxonomy FILE`: every product of a CSV or JSON Lines catalog into a
 * taxonomy, one JSON line per product, in process (resumable), or with --nats as classification
 * jobs run by `shoal worker --classify` (classify/jobs-mode.ts; --coordinate: the workers only
 * embed, this process retrieves), with an evaluation against a gold column.
 */

const DEFAULT_MODEL = 'sentence-transformers/all-MiniLM-L6-v2';
const DEFAULT_FIELDS = ['title', 'description'];

const Score = z.string().transform((text, ctx) => {
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value)) {
    ctx.addIssue({ code: 'custom', message: 'must be a number' });
    return z.NEVER;
  }
  return value;
});

const ClassifyFlags = z.strictObject({
  ...ImageFlags,
  taxonomy: z.string().min(1),
  model: ModelRef.default(DEFAULT_MODEL),
  rerankModel: ModelRef.optional(),
  rerankTop: PositiveIntFlag(1_000).optional(),
  topK: PositiveIntFlag(100).optional(),
  candidates: PositiveIntFlag(1_000).optional(),
  fields: CommaListFlag.optional(),
  template: z.string().min(1).max(8_192).optional(),
  idField: z.string().min(1).max(256).default('id'),
  imageField: z.string().min(1).max(256).optional(),
  imageModel: ModelRef.optional(),
  imageWeight: Score.pipe(z.number().min(0).max(1)).optional(),
  maxDepth: PositiveIntFlag(64).optional(),
  hierarchy: z.boolean().optional(),
  threshold: Score.optional(),
  categoryTemplate: z.string().min(1).max(512).optional(),
  maxLength: PositiveIntFlag(32_768).optional(),
  format: z.enum(['csv', 'jsonl'], { error: '--format is csv or jsonl' }).optional(),
  out: z.string().min(1).optional(),
  resume: z.boolean().optional(),
  gold: z.string().min(1).max(256).optional(),
  json: z.boolean().optional(),
  nats: NatsUrlsFlag.optional(),
  prefix: z.string().min(1).optional(),
  partItems: PositiveIntFlag(100_000).optional(),
  coordinate: z.boolean().optional(),
  detach: z.boolean().optional(),
  result: ClassifyResultTarget.optional(),
});
type ClassifyFlags = z.output<typeof ClassifyFlags>;

const EXAMPLE = `
Output lines (one per product, in input order):
  {"id": "p1", "category": {"id": "gid://shopify/TaxonomyCategory/aa-1", "path": "Apparel & Accessories > Clothing"},
   "score": 0.61, "alternatives": [{"id", "path", "score"}, ...], "decided_by": "retrieve", "needs_review": false}

Examples:
  $ shoal classify products.csv --taxonomy shopify-categories.txt --out classified.jsonl
  $ shoal classify products.jsonl --taxonomy google-taxonomy.txt --rerank-model cross-encoder/ms-marco-MiniLM-L6-v2 --top-k 3
  $ shoal classify products.jsonl --taxonomy tree.txt --gold category --json --out result.jsonl
  $ shoal classify products.jsonl --taxonomy tree.txt --nats nats://127.0.0.1:4222 --out result.jsonl   (classification jobs)
  $ shoal classify products.jsonl --taxonomy tree.txt --nats nats://127.0.0.1:4222 --detach            (prints the run id)
  $ shoal classify products.jsonl --taxonomy tree.txt --out result.jsonl --resume    (after an interrupt)

The product text is --fields (default ${DEFAULT_FIELDS.join(',')}) joined by newlines, or --template.
A field that none of the first ${FIELD_CHECK_RECORDS} records has is refused before anything runs
(a misspelt field would put every product into one category). A product whose named fields are
all missing or empty is not classified: its line is {"id", "error": {"code", "message"}}.

With --nats the catalog is published as classification jobs for \`shoal worker --classify\`
processes (no process coordinates the run; the category matrix is built once and kept in the
object store); this command follows the run and writes its results. --coordinate keeps the older
way: only the embeddings go to the workers, the rest runs here.

The category embeddings are cached under $SHOAL_CACHE_DIR/classify (one file per taxonomy,
model, model weights and template) and reused by later runs. With --gold FIELD the evaluation is printed on
stdout when --out names a file, else on stderr.

Exit status: 0 every product classified, 2 bad flags or input (a --fields name no record has),
3 some products had no text (their lines carry "error"; the others are classified).`;

/** Longest wait for one encode or score job of `shoal classify --nats --coordinate`. */
const CLASSIFY_JOB_TIMEOUT_MS = 3_600_000;

async function openEngine(app: CliApp, flags: ClassifyFlags): Promise<{ engine: Engine; close(): Promise<void> }> {
  // NATS is loaded with --nats only: the other commands, `--version` included, never pay for it.
  const [{ connectNats }, { JobsClient }, { JobsEngine }, { NatsEngine, DISCOVERY_STALL_MS }, { servedModelGate }] = await Promise.all([
    import('../../../adapters/nats/connection/connection.js'),
    import('../../../adapters/nats/jobs/jobs-client.js'),
    import('../../../adapters/nats/jobs/jobs-engine.js'),
    import('../../../adapters/nats/rpc/engine-client.js'),
    import('../../../adapters/nats/jobs/model-gate.js'),
  ]);
  const env = app.settings.nats;
  const nc = await connectNats({ ...env, ...(flags.nats === undefined ? {} : { servers: flags.nats }), retryFirstConnect: false, name: 'shoal classify' });
  try {
    const topology = app.settings.topology(flags.prefix);
    // A model no worker serves (or served) is refused at once, as shoal submit does, instead of a job that waits an hour.
    const discovery = new NatsEngine(nc, { prefix: topology.prefix });
    const jobs = await JobsClient.open(nc, { topology, modelGate: (t) => servedModelGate({ topology: t, discover: () => discovery.workers(500, DISCOVERY_STALL_MS) }) });
    await jobs.checkModel('encode', flags.model);
    if (flags.imageModel !== undefined) await jobs.checkModel('encode', flags.imageModel);
    if (flags.rerankModel !== undefined) await jobs.checkModel('score', flags.rerankModel);
    // Jobs only (no request-reply): encode and score calls become jobs, an hour at most each.
    const engine = new JobsEngine(null, jobs, { timeoutMs: CLASSIFY_JOB_TIMEOUT_MS, ...(flags.partItems === undefined ? {} : { partItems: flags.partItems }) });
    return { engine, close: () => nc.close() };
  } catch (error) {
    await nc.close();
    throw error;
  }
}

/** Flags that belong to one way of running --nats only: a mistake to say, not to ignore. */
function checkJobFlags(flags: ClassifyFlags, asJobs: boolean): void {
  const hint = 'the run goes on in the classify workers';
  if (!asJobs) {
    if (flags.detach === true) throw new ShoalError(ErrorCode.INVALID_INPUT, '--detach publishes classification jobs: give --nats URL (without --coordinate)');
    if (flags.result !== undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, '--result names where the classify workers write the results: give --nats URL (without --coordinate)');
    return;
  }
  if (flags.partItems !== undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, '--part-items sizes the encode jobs of --nats --coordinate: give --coordinate too, or leave --part-items out (classification jobs are chunks of --chunk-lines products)');
  if (flags.resume === true) throw new ShoalError(ErrorCode.INVALID_INPUT, `--resume continues an output written here: with --nats ${hint} whatever happens to this process (--detach, then its results), or give --coordinate`);
  if (flags.imageField !== undefined || flags.imageModel !== undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, '--image-field names images on this machine, which the classify workers cannot read: give --coordinate too (the images are embedded through this process), or classify in process');
  if (flags.detach === true && (flags.out !== undefined || flags.gold !== undefined)) throw new ShoalError(ErrorCode.INVALID_INPUT, `--detach prints the run id and writes no lines (${hint}): leave --out and --gold out`);
}

/** The method of a classification job: the taxonomy file's text and every setting, as POST /v1/classify takes them. */
async function jobRequest(flags: ClassifyFlags): Promise<ClassifyMethod> {
  return {
    model: flags.model,
    taxonomy: await readFile(flags.taxonomy, 'utf8'),
    ...(flags.maxDepth === undefined ? {} : { max_depth: flags.maxDepth }),
    ...(flags.topK === undefined ? {} : { top_k: flags.topK }),
    ...(flags.candidates === undefined ? {} : { candidates: flags.candidates }),
    ...(flags.rerankModel === undefined ? {} : { rerank: flags.rerankTop === undefined ? flags.rerankModel : { model: flags.rerankModel, top: flags.rerankTop } }),
    ...(flags.hierarchy === undefined ? {} : { hierarchy: flags.hierarchy }),
    ...(flags.threshold === undefined ? {} : { threshold: flags.threshold }),
    ...(flags.categoryTemplate === undefined ? {} : { category_template: flags.categoryTemplate }),
    ...(flags.maxLength === undefined ? {} : { max_length: flags.maxLength }),
  };
}

export function registerClassify(program: Command, app: CliApp): void {
  const command = program
    .command('classify')
    .summary('put every product of a catalog into a taxonomy')
    .description('Classify the products of a CSV or JSON Lines catalog into a taxonomy (Shopify, Google or one path per line).')
    .argument('<catalog>', "CSV (header row) or JSON Lines file of products; '-' for stdin")
    .requiredOption('--taxonomy <file>', 'taxonomy: Shopify "gid : A > B", Google "id - A > B", or one "A > B" path per line')
    .option('-m, --model <model>', `dense embedding model for products and categories (default: ${DEFAULT_MODEL})`)
    .option('--rerank-model <model>', 'cross-encoder that rescores the best candidates (decided_by "rerank")')
    .option('--rerank-top <n>', 'candidates the cross-encoder rescores (default 20)')
    .option('--top-k <k>', 'categories per product: the best plus k-1 alternatives (default 5)')
    .option('--candidates <n>', 'candidates retrieved (default: max(top-k, rerank-top), 20 with --hierarchy or images)')
    .option('--fields <list>', `product fields embedded, comma-separated (default: ${DEFAULT_FIELDS.join(',')})`)
    .option('--template <text>', 'product text template with {field} placeholders, instead of --fields')
    .option('--id-field <name>', 'field holding the product id (default: id; missing: the record number)')
    .option('--image-field <name>', 'field holding an image path or URL, fused with --image-model')
    .option('--image-model <model>', 'CLIP-style model for image similarity (with --image-field)')
    .option('--image-weight <w>', 'weight of the image similarity, 0..1 (default 0.3)')
    .option('--max-depth <n>', 'use taxonomy categories down to this depth only')
    .option('--hierarchy', 'keep the path consistent: each level is the branch the candidates vote for')
    .option('--threshold <score>', 'scores below this are marked needs_review (default 0.5)')
    .option('--category-template <text>', 'category text: {path}, {name}, {id} (default {path})')
    .option('--max-length <n>', "maximum tokens per text (default: the model's own)")
    .option('--format <format>', 'csv or jsonl (default: from the file extension, .csv or else JSON Lines)')
    .option('-o, --out <file>', 'write the JSON lines to FILE (FILE.partial until done; default: stdout)')
    .option('--resume', 'continue the FILE.partial of an interrupted run after its last complete line')
    .option('--gold <field>', 'field with the true category (id or path): print accuracy per level, exact and hierarchical P/R/F1')
    .option('--json', 'with --gold: the evaluation as one JSON object')
    .option('--nats <urls>', 'publish the catalog as classification jobs for `shoal worker --classify` (NATS URLs, comma-separated)')
    .option('--prefix <prefix>', 'with --nats: subject prefix (env SHOAL_SUBJECT_PREFIX; default shoal)')
    .option('--detach', 'with --nats: publish the run, print its id and exit (its status: GET /v1/jobs/RUN on a gateway with SHOAL_CLASSIFY_JOBS=1)')
    .option('--result <uri>', 'with --nats: where the workers write the JSON Lines results (obj://, s3:// or file:// inside their SHOAL_FILE_ROOTS; default: the object store)')
    .option('--coordinate', 'with --nats: classify here, only the embeddings go to the workers as encode jobs (no classify worker needed)')
    .option('--part-items <n>', 'with --nats --coordinate: products per job part (default 64)');
  addImageOptions(command);
  command.addHelpText('after', EXAMPLE);
  command.action(async (catalog: string, _options: unknown, self: Command) => {
    const flags = parseFlags(ClassifyFlags, self);
    if (flags.imageField !== undefined && flags.imageModel === undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, '--image-field needs --image-model (a CLIP-style model)');
    // A flag that changes nothing without its partner is a mistake to say, not to ignore.
    if (flags.imageWeight !== undefined && flags.imageModel === undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, '--image-weight needs --image-model (and --image-field)');
    if (flags.rerankTop !== undefined && flags.rerankModel === undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, '--rerank-top needs --rerank-model (a cross-encoder)');
    if (flags.prefix !== undefined && flags.nats === undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, '--prefix is the subject prefix of --nats: give --nats URL too, or leave --prefix out');
    if (flags.partItems !== undefined && flags.nats === undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, '--part-items sizes the job parts of --nats: give --nats URL too, or leave --part-items out');
    if (flags.coordinate === true && flags.nats === undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, '--coordinate runs --nats the older way: give --nats URL too, or leave --coordinate out');
    // --nats alone: classification jobs, run by the classify workers (classify/jobs-mode.ts).
    const asJobs = flags.nats !== undefined && flags.coordinate !== true;
    checkJobFlags(flags, asJobs);
    if (flags.json === true && flags.gold === undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, '--json prints the --gold evaluation: give --gold FIELD');
    if (flags.fields !== undefined && flags.fields.length === 0) throw new ShoalError(ErrorCode.INVALID_INPUT, '--fields names no field; give the product fields to embed, comma-separated (e.g. --fields title,description)');
    if (flags.fields !== undefined && flags.template !== undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, '--fields and --template both say how the product text is built; give one');
    const textSpec = { fields: flags.fields ?? DEFAULT_FIELDS, template: flags.template, defaultFields: flags.fields === undefined };
    const config = app.config(self);
    const taxonomy = await loadTaxonomyFile(flags.taxonomy, { maxDepth: flags.maxDepth });
    const source = await openSource(catalog, app.io.stdin);
    let products: AsyncGenerator<ProductRecord[]>;
    try {
      // Before a model loads or a category is embedded: a misspelt --fields fails in a second.
      products = await readCheckedProducts(readProducts(source, catalogFormat(source.name === 'stdin' ? undefined : source.name, flags.format), config.chunkLines), textSpec);
    } catch (error) {
      if (source.name !== 'stdin') source.stream.destroy();
      throw error;
    }
    const sink = await openLineOutput(flags.out, app.io.stdout, { resume: flags.resume === true });
    // --resume with nothing to continue starts from the first product: said, not silent.
    if (flags.resume === true && (sink.resumed?.lines ?? 0) === 0 && !config.quiet) {
      app.io.stderr.write(`warning: --resume: ${flags.out ?? ''}.partial holds no finished product (${sink.resumed === null ? 'there is none' : 'it is empty'}): starting from the first one\n`);
    }
    const progress = app.progress(config);
    const bar = new ClassifyBar(app.io.stderr, progress.barsEnabled, source.totalBytes);
    const evaluator = flags.gold === undefined ? null : new Evaluator();
    // What the run did, for the exit status after the output is final.
    const outcome = { lines: 0, failed: 0 };
    const log = (line: string): void => {
      if (!config.quiet) app.io.stderr.write(`${line}\n`);
    };
    const body = async (engine: Engine): Promise<void> => {
      const classifier = await TaxonomyClassifier.open(
        engine,
        taxonomy,
        {
          model: flags.model,
          topK: flags.topK,
          candidates: flags.candidates,
          rerankModel: flags.rerankModel,
          rerankTop: flags.rerankTop,
          hierarchy: flags.hierarchy,
          threshold: flags.threshold,
          imageModel: flags.imageModel,
          imageWeight: flags.imageWeight,
          categoryTemplate: flags.categoryTemplate,
          maxLength: flags.maxLength,
          cacheDir: app.settings.cacheDir,
        },
        { signal: app.io.signal },
        (embedded, total) => bar.categories(embedded, total, log),
      );
      try {
        const stats = classifier.categoryStats;
        log(`categories: ${stats.categories} ${stats.built ? `embedded in ${stats.seconds.toFixed(1)} s, cached` : 'loaded from the cache'} (${stats.file ?? 'memory'})`);
        const run = await runClassify({
          products,
          classifier,
          taxonomy,
          sink,
          partialOutput: flags.out === undefined ? null : `${flags.out}.partial`,
          fields: textSpec.fields,
          template: textSpec.template,
          idField: flags.idField,
          imageField: flags.imageField,
          goldField: flags.gold,
          evaluator,
          signal: app.io.signal,
          ...(flags.nats === undefined ? {} : { writeEvery: config.chunkLines }),
          onProgress: (bytes, products) => bar.update(bytes, products),
          onSkipped: (bytes) => bar.skipped(bytes),
          warn: (message) => log(`warning: ${message}`),
        });
        // The whole output, lines kept by --resume included.
        outcome.lines = run.skipped + run.products + run.failed;
        outcome.failed = run.failed + run.failedResumed;
        bar.stop();
        const rate = run.seconds > 0 ? run.products / run.seconds : 0;
        const noText = run.failed > 0 ? `, ${run.failed} without text (error lines)` : '';
        log(`classified ${run.products} products in ${run.seconds.toFixed(1)} s (${rate.toFixed(1)} products/s)${noText}${run.skipped > 0 ? `, ${run.skipped} already done (--resume)` : ''}`);
      } finally {
        await classifier.close();
      }
    };
    let detached = false;
    try {
      if (asJobs) {
        const started = performance.now();
        const done = await (await import('./classify/jobs-mode.js')).classifyAsJobs({
          app,
          nats: flags.nats ?? [],
          prefix: flags.prefix,
          request: await jobRequest(flags),
          models: { encode: [flags.model], score: flags.rerankModel === undefined ? [] : [flags.rerankModel] },
          products,
          taxonomy,
          fields: textSpec.fields,
          template: textSpec.template,
          idField: flags.idField,
          goldField: flags.gold,
          evaluator,
          result: flags.result,
          chunkItems: config.chunkLines,
          detach: flags.detach === true,
          sink,
          barsEnabled: progress.barsEnabled,
          log,
          warn: (message) => log(`warning: ${message}`),
        });
        detached = done === null;
        if (done !== null) {
          outcome.lines = done.lines;
          outcome.failed = done.failed;
          const seconds = (performance.now() - started) / 1000;
          const classified = done.lines - done.failed;
          log(`classified ${classified} products in ${seconds.toFixed(1)} s (${(seconds > 0 ? classified / seconds : 0).toFixed(1)} products/s)${done.failed > 0 ? `, ${done.failed} without text (error lines)` : ''}`);
        }
      } else if (flags.nats === undefined) {
        await app.withEngine(config, progress, body, { images: imagePolicyFromFlags(flags) });
      } else {
        const remote = await openEngine(app, flags);
        try {
          await body(remote.engine);
        } finally {
          await remote.close();
        }
      }
      bar.stop();
      progress.stop();
      await sink.finish();
    } catch (error) {
      bar.stop();
      progress.stop();
      const partial = await sink.abort();
      const shoal = toShoalError(error);
      throw partial === null ? error : new ShoalError(shoal.code, shoal.message, { cause: shoal.cause, details: { ...shoal.details, partialOutput: partial, linesWritten: sink.linesWritten } });
    } finally {
      await products.return(undefined);
      if (source.name !== 'stdin') source.stream.destroy();
    }
    if (detached) return;
    const { failed, lines } = outcome;
    const classified = lines - failed;
    if (evaluator !== null && (classified > 0 || failed === 0)) {
      const evaluation = evaluator.result();
      // A misspelt --gold field must not print an all-zero evaluation as if it were one.
      if (evaluation.products === 0) {
        throw new ShoalError(ErrorCode.INVALID_INPUT, `--gold ${flags.gold ?? ''}: no product has a value in this field, so there is nothing to evaluate (the classifications were written)`);
      }
      const text = flags.json === true ? evaluationJson(evaluation) : evaluationTable(evaluation);
      (flags.out === undefined ? app.io.stderr : app.io.stdout).write(text);
    }
    if (failed > 0) {
      // Every line is written (FILE is final); the products without text are what is left to fix.
      const total = lines;
      throw new ShoalError(
        ErrorCode.PARTIAL_FAILURE,
        classified === 0
          ? `${total === 1 ? 'the product has' : `all ${total} products have`} no text in ${textFlag(textSpec)}; nothing was classified (${total === 1 ? 'its line carries' : 'their lines carry'} "error")`
          : `${failed} of ${total} products ${failed === 1 ? 'has' : 'have'} no text in ${textFlag(textSpec)} and ${failed === 1 ? 'was' : 'were'} not classified (${failed === 1 ? 'its line carries' : 'their lines carry'} "error"); the others are classified`,
        { details: { failed, classified } },
      );
    }
  });
}
