/**
 * Every setting Shoal reads from the environment, in one table: the variables, the flag that
 * overrides them, who reads them, what they mean and their default. The services' config code
 * takes its variable names and defaults from here, and the settings table of docs/configuration.md is generated
 * from it (`npx tsx scripts/settings-table.ts --write`; test/unit/services/settings/table.test.ts fails
 * when that table and this one disagree). Adapters and pipelines never read the environment:
 * they get plain option objects built from these settings.
 */

import { STORE_SETTINGS } from '../../adapters/stores/registry.js';

export type SettingUser = 'all' | 'cli' | 'worker' | 'gateway' | 'sink' | 'dev' | 'submit';

export interface SettingSpec {
  /** Environment variables, the preferred one first. */
  readonly env: readonly string[];
  /** The command-line flag that wins over the variables, where there is one. */
  readonly flag?: string;
  readonly usedBy: readonly SettingUser[];
  readonly meaning: string;
  /** The default value the config code uses (null: unset). */
  readonly default: string | number | boolean | null;
  /** How the default reads in the settings table, when the value alone does not say it. */
  readonly shown?: string;
}

const natsClients: readonly SettingUser[] = ['worker', 'gateway', 'sink', 'submit'];

/** The stores registry's settings as entries of this table, read by the services that open indexes. */
function storeSettings<U extends readonly SettingUser[]>(usedBy: U): { readonly [K in keyof typeof STORE_SETTINGS]: (typeof STORE_SETTINGS)[K] & { readonly usedBy: U } } {
  const entries = Object.entries(STORE_SETTINGS).map(([key, spec]) => [key, { ...spec, usedBy }] as const);
  return Object.fromEntries(entries) as { readonly [K in keyof typeof STORE_SETTINGS]: (typeof STORE_SETTINGS)[K] & { readonly usedBy: U } };
}

export const SETTINGS = {
  config: { env: ['SHOAL_CONFIG'], flag: '--config', usedBy: ['all'], meaning: 'settings file (YAML/JSON), keys named as in this table (`memoryBudget: 4GiB`) or as their variables; variables and flags win over it', default: null, shown: 'none' },
  catalog: { env: ['SHOAL_CATALOG'], flag: '--catalog', usedBy: ['all'], meaning: 'catalog file or folder (YAML/JSON)', default: null, shown: 'none: models by hub id or folder' },
  modelDir: { env: ['SHOAL_MODEL_DIR'], flag: '--model-dir', usedBy: ['all'], meaning: 'models directories, `:`-separated (`org/name/` inside)', default: null, shown: 'none' },
  cacheDir: { env: ['SHOAL_CACHE_DIR'], usedBy: ['all'], meaning: "Shoal's cache (int8 graphs, batch-budget measurements)", default: null, shown: '`~/.cache/shoal`' },
  hubCache: { env: ['HF_HUB_CACHE', 'HUGGINGFACE_HUB_CACHE', 'HF_HOME'], usedBy: ['all'], meaning: 'Hugging Face hub cache (`$HF_HOME/hub` when only `HF_HOME` is set)', default: null, shown: '`~/.cache/huggingface/hub`' },
  hubEndpoint: { env: ['HF_ENDPOINT'], usedBy: ['all'], meaning: 'hub address (a mirror or a private hub)', default: 'https://huggingface.co' },
  hubToken: { env: ['HF_TOKEN'], usedBy: ['all'], meaning: 'token for gated and private models (never logged)', default: null, shown: 'none' },
  offline: { env: ['HF_HUB_OFFLINE', 'SHOAL_OFFLINE'], usedBy: ['all'], meaning: '`1`: never download, use local models and the cache only', default: false, shown: 'off' },
  downloadTimeout: { env: ['HF_HUB_DOWNLOAD_TIMEOUT'], usedBy: ['all'], meaning: 'seconds without data before a download attempt fails', default: 60 },
  threads: { env: ['SHOAL_THREADS'], flag: '--threads', usedBy: ['all'], meaning: 'onnxruntime intra-op threads per model', default: null, shown: 'all cores' },
  providers: { env: ['SHOAL_PROVIDERS'], flag: '--providers', usedBy: ['all'], meaning: 'execution providers in order (`cuda`, `webgpu`, `cpu`); CPU is always the fallback', default: 'cpu' },
  batchTokens: { env: ['SHOAL_BATCH_TOKENS'], flag: '--batch-tokens', usedBy: ['all'], meaning: 'padded tokens per batch, or `auto` (measured per model once); unset: 1024, 512 for a model running int8', default: 1024 },
  memoryBudget: { env: ['SHOAL_MEMORY_BUDGET'], flag: '--memory-budget', usedBy: ['all'], meaning: 'memory for models (`6GiB`, `60%`)', default: null, shown: 'half the RAM (or of the container limit)' },
  cpuArena: { env: ['SHOAL_CPU_ARENA'], usedBy: ['all'], meaning: "`1`/`0`: onnxruntime's CPU arena on or off (keeps each model's largest batch allocated; without it large batches map fresh memory, up to a third slower)", default: null, shown: 'on in one-shot CLI commands, off in `shoal worker` / `gateway` / `dev`' },
  imageRoots: { env: ['SHOAL_IMAGE_ROOTS'], usedBy: ['all'], meaning: 'folders image items may name by path, `:`-separated', default: null, shown: 'none (images as bytes only)' },
  imageHosts: { env: ['SHOAL_IMAGE_HOSTS'], usedBy: ['all'], meaning: 'hosts image URLs may be fetched from (`example.com`, `*.example.com`), comma-separated', default: null, shown: 'none' },
  stopTimeoutMs: { env: ['SHOAL_STOP_TIMEOUT_MS'], usedBy: ['cli'], meaning: 'one-shot commands (encode, ingest, classify...): the longest stop after a first Ctrl-C/SIGTERM before the command stops at once, as on a second signal; 0 = wait for the work in flight however long (ms)', default: 30_000 },
  chunkLines: { env: ['SHOAL_CHUNK_LINES'], flag: '--chunk-lines', usedBy: ['cli'], meaning: 'input lines handed to the engine at a time', default: 256 },
  logLevel: { env: ['SHOAL_LOG_LEVEL'], usedBy: ['worker', 'gateway', 'sink', 'dev'], meaning: 'pino log level (JSON logs on stderr)', default: 'info', shown: '`info` (`warn` in `shoal dev`)' },
  nativeTrim: { env: ['SHOAL_NATIVE_TRIM'], usedBy: ['all'], meaning: '`0`: do not use the `malloc_trim` addon; `shoal` then runs with `MALLOC_TRIM_THRESHOLD_=0` (about 20 % slower inference)', default: true, shown: 'addon used when built' },
  mappedWeights: { env: ['SHOAL_MAPPED_WEIGHTS'], usedBy: ['all'], meaning: '`0`: load graphs as they are, not from a copy under `$SHOAL_CACHE_DIR/mapped` whose weights onnxruntime maps from disk (made once per graph of 16 MiB or more; sessions are created about 3× faster)', default: true, shown: 'on' },
  fromSource: { env: ['SHOAL_FROM_SOURCE'], usedBy: ['all'], meaning: '`1`: run the TypeScript sources through tsx even when `dist/` is built', default: false, shown: 'off' },
  models: { env: ['SHOAL_MODELS'], flag: '--models', usedBy: ['worker'], meaning: 'models served, comma-separated', default: null, shown: 'every catalog entry, else every model under the models directories' },
  preload: { env: ['SHOAL_PRELOAD'], flag: '--preload', usedBy: ['worker'], meaning: 'models loaded at start and kept resident', default: null, shown: 'none' },
  concurrency: { env: ['SHOAL_CONCURRENCY'], flag: '--concurrency', usedBy: ['worker'], meaning: 'job parts in flight at once', default: 32 },
  ackWaitMs: { env: ['SHOAL_ACK_WAIT_MS'], flag: '--ack-wait', usedBy: ['worker'], meaning: 'ack wait of the job consumers (ms)', default: 30_000 },
  maxDeliver: { env: ['SHOAL_MAX_DELIVER'], flag: '--max-deliver', usedBy: ['worker'], meaning: 'deliveries of a job part before it is dead-lettered', default: 5 },
  drainTimeoutMs: { env: ['SHOAL_DRAIN_TIMEOUT_MS'], flag: '--drain-timeout', usedBy: ['worker'], meaning: 'longest graceful drain after SIGTERM (ms)', default: 30_000 },
  fileRoots: { env: ['SHOAL_FILE_ROOTS'], flag: '--file-root', usedBy: ['worker', 'gateway'], meaning: 'folders `file://` payload and result references may use, `:`-separated (the gateway refuses `file://` result targets outside them at submit; the flag is `shoal worker`\'s, the gateway reads the variable)', default: null, shown: 'none (refused)' },
  s3Buckets: { env: ['SHOAL_S3_BUCKETS'], usedBy: ['worker', 'gateway', 'sink', 'submit'], meaning: 'buckets `s3://` payload references, result targets and `POST /v1/ingest` sources may use, comma-separated', default: null, shown: 'any bucket the credentials reach' },
  s3Endpoint: { env: ['AWS_ENDPOINT_URL_S3', 'AWS_ENDPOINT_URL'], usedBy: ['all'], meaning: 'S3-compatible endpoint (MinIO, s3rver); when set, path-style addressing', default: null, shown: 'AWS S3' },
  s3Region: { env: ['AWS_REGION', 'AWS_DEFAULT_REGION'], usedBy: ['all'], meaning: 'S3 region', default: null, shown: "the SDK's region chain; `us-east-1` with a custom endpoint" },
  s3Credentials: { env: ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN'], usedBy: ['all'], meaning: 'static S3 credentials (never logged)', default: null, shown: "the SDK's default chain (profile, SSO, web identity, instance role)" },
  s3Profile: { env: ['AWS_PROFILE'], usedBy: ['all'], meaning: 'profile of `~/.aws/config` / `~/.aws/credentials` for S3', default: null, shown: 'the SDK default' },
  s3MaxAttempts: { env: ['AWS_MAX_ATTEMPTS'], usedBy: ['all'], meaning: "attempts per S3 request in the SDK's standard retry mode (then Shoal retries the operation for up to 60 s)", default: 5 },
  parseRole: { env: ['SHOAL_PARSE'], flag: '--parse', usedBy: ['worker'], meaning: '`1`: also run the parse tasks of `shoal ingest --nats` (documents, OCR)', default: false, shown: 'off' },
  documentsRole: { env: ['SHOAL_DOCUMENTS'], flag: '--documents', usedBy: ['worker'], meaning: '`1`: run document jobs end to end (`<prefix>.documents.<pipeline>`: read, parse, chunk, encode through the model workers, write, event; docs/nats.md, **Document jobs**)', default: false, shown: 'off' },
  documentJobs: { env: ['SHOAL_DOCUMENT_JOBS'], usedBy: ['gateway'], meaning: '`1`: `POST /v1/ingest` publishes document jobs for `shoal worker --documents` (the request names a pipeline and an index; no `model`, `force`, `prune` or inline definition) instead of coordinating the run in this gateway', default: false, shown: 'off' },
  classifyRole: { env: ['SHOAL_CLASSIFY'], flag: '--classify', usedBy: ['worker'], meaning: '`1`: run classification jobs (`<prefix>.classify.>`: a catalog\'s chunks classified, encoded through the model workers, the category matrix shared through the object store, the results assembled in catalog order; docs/nats.md, **Classification jobs**)', default: false, shown: 'off' },
  classifyJobs: { env: ['SHOAL_CLASSIFY_JOBS'], usedBy: ['gateway'], meaning: '`1`: a `POST /v1/classify` job is published as classification jobs for `shoal worker --classify` (status in KV, results in the object store or a `result` target; any replica answers `/v1/jobs/<id>`) instead of running in this gateway', default: false, shown: 'off' },
  documentStallMs: { env: ['SHOAL_DOCUMENTS_STALL_MS'], usedBy: ['worker'], meaning: 'a documents worker\'s batch that shows no progress this long (no page parsed, no encode part done, no stage step, no document ended; an index build does not count) has its jobs handed back for another delivery and its slot freed; `0`: never (ms)', default: 3_600_000, shown: '`3600000` (1 h)' },
  documentPipelines: { env: ['SHOAL_DOCUMENT_PIPELINES'], flag: '--pipelines', usedBy: ['worker'], meaning: 'pipelines a documents worker serves, comma-separated names (built-in, or files of `SHOAL_PIPELINES`): one durable consumer each', default: 'documents' },
  pipelinesDir: { env: ['SHOAL_PIPELINES'], usedBy: ['worker', 'gateway', 'cli'], meaning: 'folder of pipeline files (`NAME.yaml`, `.yml` or `.json`) a document job may name by `NAME` (a job names a pipeline, never a path)', default: null, shown: 'none: built-in pipelines only' },
  parseMaxPages: { env: ['SHOAL_PARSE_MAX_PAGES'], usedBy: ['worker'], meaning: 'most pages of a document a parse task may allow (a task asking more gets this)', default: 5000 },
  parseMaxBytes: { env: ['SHOAL_PARSE_MAX_BYTES'], usedBy: ['worker'], meaning: 'most bytes of a document a parse task may allow (a task asking more gets this)', default: 104_857_600, shown: '100 MiB' },
  parseMaxDpi: { env: ['SHOAL_PARSE_MAX_DPI'], usedBy: ['worker'], meaning: 'highest OCR render resolution a parse task may ask for (dpi)', default: 300 },
  workerId: { env: ['SHOAL_WORKER_ID'], flag: '--worker-id', usedBy: ['worker'], meaning: 'name in results, replies and logs', default: null, shown: '`<hostname>-<pid>`' },
  metricsPort: { env: ['SHOAL_METRICS_PORT'], flag: '--metrics-port', usedBy: ['worker', 'sink'], meaning: 'port of the worker\'s (or results sink\'s) `/metrics`, `/healthz`, `/readyz`', default: null, shown: 'off' },
  metricsHost: { env: ['SHOAL_METRICS_HOST'], flag: '--metrics-host', usedBy: ['worker', 'sink'], meaning: 'address of that metrics port (`0.0.0.0` for a scraper on another host: the port has no authentication, and a warning says so)', default: '127.0.0.1' },
  natsServer: { env: ['SHOAL_NATS_SERVER'], usedBy: ['dev'], meaning: 'the `nats-server` executable `shoal dev` starts', default: null, shown: '`nats-server` on `PATH`, else in `/usr/sbin`, `/usr/local/bin`' },
  resultsDir: { env: ['SHOAL_RESULTS_DIR'], flag: '--results-dir', usedBy: ['sink', 'dev'], meaning: 'folder job results are written into (`shoal sink` takes it as `--dir`)', default: 'shoal-results', shown: '`./shoal-results`' },
  natsUrl: { env: ['NATS_URL'], flag: '--nats', usedBy: natsClients, meaning: 'NATS servers, comma-separated', default: 'nats://127.0.0.1:4222' },
  natsUser: { env: ['NATS_USER', 'NATS_PASSWORD'], usedBy: natsClients, meaning: 'NATS user and password', default: null, shown: 'none' },
  natsToken: { env: ['NATS_TOKEN'], usedBy: natsClients, meaning: 'NATS token', default: null, shown: 'none' },
  natsCreds: { env: ['NATS_CREDS'], flag: '--nats-creds', usedBy: natsClients, meaning: 'NATS `.creds` file (JWT + NKey seed; the flag is `shoal gateway`\'s, the others read the variable)', default: null, shown: 'none' },
  natsTls: { env: ['NATS_TLS_CA', 'NATS_TLS_CERT', 'NATS_TLS_KEY'], usedBy: natsClients, meaning: 'CA bundle, client certificate and key for TLS to NATS', default: null, shown: 'none' },
  subjectPrefix: { env: ['SHOAL_SUBJECT_PREFIX'], flag: '--prefix', usedBy: natsClients, meaning: 'subject, stream and bucket prefix', default: 'shoal' },
  streamReplicas: { env: ['SHOAL_STREAM_REPLICAS'], usedBy: [...natsClients, 'cli'], meaning: 'replicas (1 to 5) of the streams, KV buckets and object store Shoal creates on clustered JetStream, at most the number of servers; applied when they are created, an existing stream keeps its count (`nats stream edit --replicas`, docs/deploy.md)', default: 1 },
  host: { env: ['SHOAL_HOST'], flag: '--host', usedBy: ['gateway'], meaning: 'address the gateway listens on', default: '127.0.0.1' },
  port: { env: ['SHOAL_PORT'], flag: '--port', usedBy: ['gateway'], meaning: 'port the gateway listens on', default: 8080 },
  apiTokens: { env: ['SHOAL_API_TOKENS'], usedBy: ['gateway'], meaning: 'bearer tokens, comma-separated (at least 16 characters each)', default: null, shown: 'no auth' },
  apiTokensFile: { env: ['SHOAL_API_TOKENS_FILE'], flag: '--api-tokens-file', usedBy: ['gateway'], meaning: 'file of bearer tokens, one per line', default: null, shown: 'none' },
  metricsAuth: { env: ['SHOAL_METRICS_AUTH'], flag: '--metrics-auth', usedBy: ['gateway'], meaning: '`1`: `/metrics` needs a token too', default: false, shown: 'off' },
  bodyLimit: { env: ['SHOAL_BODY_LIMIT'], flag: '--body-limit', usedBy: ['gateway'], meaning: 'largest request body', default: '8MiB' },
  requestTimeoutMs: { env: ['SHOAL_REQUEST_TIMEOUT_MS'], flag: '--request-timeout-ms', usedBy: ['gateway'], meaning: 'longest synchronous call (ms)', default: 60_000 },
  shutdownTimeoutMs: { env: ['SHOAL_SHUTDOWN_TIMEOUT_MS'], flag: '--shutdown-timeout-ms', usedBy: ['gateway'], meaning: 'time for in-flight requests after SIGTERM (ms)', default: 30_000 },
  drainDelayMs: { env: ['SHOAL_DRAIN_DELAY_MS'], flag: '--drain-delay-ms', usedBy: ['gateway'], meaning: 'after SIGTERM, keep serving this long with `/readyz` answering 503 before the port closes, so load balancers stop sending first (ms)', default: 0 },
  corsOrigins: { env: ['SHOAL_CORS_ORIGINS'], flag: '--cors-origins', usedBy: ['gateway'], meaning: 'browser origins allowed cross-origin, comma-separated', default: null, shown: 'CORS off' },
  maxInFlightItems: { env: ['SHOAL_MAX_INFLIGHT_ITEMS'], flag: '--max-inflight-items', usedBy: ['gateway'], meaning: 'items of synchronous calls in flight per model before calls are answered 429', default: 2048 },
  maxQueueSeconds: { env: ['SHOAL_MAX_QUEUE_SECONDS'], flag: '--max-queue-seconds', usedBy: ['gateway'], meaning: 'most seconds of queued work per model (at its measured speed) before calls are answered 429', default: 5 },
  jobTimeoutMs: { env: ['SHOAL_JOB_TIMEOUT_MS'], usedBy: ['gateway', 'submit'], meaning: 'a job not finished this long after submission ends `failed`/`partial` (ms)', default: 86_400_000, shown: '`86400000` (24 h)' },
  submitTimeoutMs: { env: ['SHOAL_SUBMIT_TIMEOUT_MS'], usedBy: ['gateway', 'submit'], meaning: 'a job whose parts were not all published this long after it was created ends `failed` (ms)', default: 600_000, shown: '`600000` (10 min)' },
  parseWorkerTimeoutMs: { env: ['SHOAL_PARSE_WORKER_TIMEOUT_MS'], usedBy: ['cli', 'gateway'], meaning: '`shoal ingest --nats` and `POST /v1/ingest`: a run whose documents wait this long with no worker pulling parse tasks fails with `UNAVAILABLE` (a warning comes after 5 s) (ms)', default: 300_000, shown: '`300000` (5 min)' },
  runHeartbeatMs: { env: ['SHOAL_RUN_HEARTBEAT_MS'], usedBy: ['cli', 'gateway'], meaning: '`shoal ingest --nats` and `POST /v1/ingest`: how often the coordinator rewrites its run\'s status; a run with no write for 6 times this reads as `failed` (`TIMEOUT`, abandoned) and may be resubmitted (ms)', default: 5_000, shown: '`5000` (abandoned after 30 s)' },
  indexes: { env: ['SHOAL_INDEXES'], usedBy: ['gateway', 'sink', 'submit', 'worker', 'cli'], meaning: 'indexes `POST /v1/search`, `/v1/ingest`, `/v1/indexes` and job result targets `{"kind": "index", "index": name}` may name: `name=dir` or `name=URI`, comma-separated (a request names an index, never a path; the results sink writes the jobs\' rows; `shoal search` and `shoal index` take a name as `--index`)', default: null, shown: 'none' },
  classifySyncItems: { env: ['SHOAL_CLASSIFY_SYNC_ITEMS'], usedBy: ['gateway'], meaning: '`POST /v1/classify` answers up to this many products synchronously; more become a job (202, `/v1/jobs/<id>`)', default: 256 },
  classifyResultsDir: { env: ['SHOAL_CLASSIFY_RESULTS_DIR'], usedBy: ['gateway'], meaning: 'folder where classification jobs write their JSON Lines results (a folder per gateway process beneath it, removed when it stops)', default: null, shown: '`$SHOAL_CACHE_DIR/classify-jobs`' },
  embedModel: { env: ['SHOAL_EMBED_MODEL'], flag: '--embed-model', usedBy: ['gateway'], meaning: "model behind TEI's `/embed`", default: null, shown: 'none' },
  rerankModel: { env: ['SHOAL_RERANK_MODEL'], flag: '--rerank-model', usedBy: ['gateway'], meaning: "model behind TEI's `/rerank`", default: null, shown: 'none' },
  sparseModel: { env: ['SHOAL_SPARSE_MODEL'], flag: '--sparse-model', usedBy: ['gateway'], meaning: "sparse (SPLADE) model behind TEI's `/embed_sparse` (unset: the embed model)", default: null, shown: 'none' },
  // PGPASSWORD, CHROMA_API_KEY, QDRANT_API_KEY, SHOAL_STORE_TIMEOUT_MS...: declared by the store backend that reads them (adapters/stores/<backend>/backend.ts).
  ...storeSettings(['cli', 'gateway', 'worker', 'sink']),
} as const satisfies Record<string, SettingSpec>;

export type SettingKey = keyof typeof SETTINGS;

/** The value of a setting's first variable that is set and not blank, trimmed. */
export function envValue(env: NodeJS.ProcessEnv, key: SettingKey): string | undefined {
  for (const name of SETTINGS[key].env) {
    const value = env[name];
    if (value !== undefined && value.trim() !== '') return value.trim();
  }
  return undefined;
}

/** Boolean variables as the hub library reads them. */
export function isTrueValue(value: string | undefined): boolean {
  return value !== undefined && ['1', 'true', 'yes', 'on'].includes(value.trim().toLowerCase());
}
