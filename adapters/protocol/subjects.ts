import { ErrorCode, ShoalError } from './errors.js';

/**
 * NATS names shared by every service: subjects per primitive and model, stream, consumer, KV and
 * object-store names. Model ids (`BAAI/bge-small-en-v1.5`) are not valid subject tokens or consumer
 * names ('.', '/', '*', '>' and spaces are reserved), so they are escaped reversibly: letters,
 * digits and '-' stay, every other character becomes `_` + two hex digits per UTF-8 byte
 * (`BAAI_2Fbge-small-en-v1_2E5`).
 */

export const PRIMITIVES = ['encode', 'score', 'extract'] as const;
export type Primitive = (typeof PRIMITIVES)[number];
/** What request-reply serves: the primitives, plus tokenize (request-reply only, never a job). */
export type RpcOperation = Primitive | 'tokenize';

export const DEFAULT_SUBJECT_PREFIX = 'shoal';

const KEEP = /^[A-Za-z0-9-]$/;
const MAX_TOKEN = 200;

export function modelToken(model: string): string {
  if (model.length === 0) throw new ShoalError(ErrorCode.INVALID_INPUT, 'model name is empty');
  let out = '';
  for (const char of model) {
    if (KEEP.test(char)) {
      out += char;
      continue;
    }
    for (const byte of Buffer.from(char, 'utf8')) out += `_${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  if (out.length > MAX_TOKEN) throw new ShoalError(ErrorCode.INVALID_INPUT, `model name "${model.slice(0, 60)}..." is too long for a subject`);
  return out;
}

export function modelFromToken(token: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < token.length; ) {
    const char = token[i] ?? '';
    if (char === '_') {
      const hex = token.slice(i + 1, i + 3);
      if (!/^[0-9A-F]{2}$/.test(hex)) throw new ShoalError(ErrorCode.INVALID_INPUT, `"${token}" is not an escaped model token`);
      bytes.push(Number.parseInt(hex, 16));
      i += 3;
    } else if (KEEP.test(char)) {
      bytes.push(char.charCodeAt(0));
      i++;
    } else {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `"${token}" is not an escaped model token`);
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

/** Job ids are used in subjects and KV keys: short, safe characters only. */
export const JOB_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

export function checkJobId(id: string): string {
  if (!JOB_ID_PATTERN.test(id)) throw new ShoalError(ErrorCode.INVALID_INPUT, `job id "${id.slice(0, 80)}" must be 1-64 characters of A-Z a-z 0-9 _ -`);
  return id;
}

export interface NatsNames {
  prefix: string;
  /** Work-queue stream of jobs: `<prefix>.jobs.>`. */
  jobsStream: string;
  /** Results of job parts: `<prefix>.results.>`. */
  resultsStream: string;
  /** Dead letters with the reason and the original message: `<prefix>.dlq.>`. */
  deadLetterStream: string;
  /** KV bucket of job status, key = job id. */
  statusBucket: string;
  /** Object store bucket for payloads and results over the message size limit. */
  payloadBucket: string;
  /** Queue group of workers answering requests. */
  workerQueue: string;
  /** Durable consumer of the results sink on the results stream. */
  resultsSink: string;
  jobs(primitive: Primitive, model: string): string;
  /** Every job subject (stream binding). */
  allJobs(): string;
  /** Durable pull consumer of one primitive and model. */
  consumer(primitive: Primitive, model: string): string;
  results(jobId: string, part: number): string;
  allResults(): string;
  jobResults(jobId: string): string;
  deadLetter(primitive: Primitive, model: string): string;
  allDeadLetters(): string;
  /** Request-reply, answered only by workers that have the model resident. */
  resident(operation: RpcOperation, model: string): string;
  /** Request-reply fallback, answered by any worker that serves the model (it loads it). */
  serving(operation: RpcOperation, model: string): string;
  /** Worker discovery: every worker answers with the models it serves and holds. */
  workers(): string;
}

function checkPrefix(prefix: string): string {
  if (!/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/.test(prefix)) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `subject prefix "${prefix}" must be dot-separated tokens of A-Z a-z 0-9 _ -`);
  }
  return prefix;
}

/** The deployment's own object store is `<p>_payloads`. */
const PAYLOAD_BUCKET_SUFFIX = '_payloads';

/**
 * Whether an object store bucket belongs to the deployment whose payload bucket is
 * `payloadBucket` (`<p>_payloads`): that bucket, or one named `<p>-<name>` (a results bucket an
 * operator creates, e.g. `shoal-results`). `<p>` is the prefix lower-cased with `.` and `-` turned
 * into `_`, so it never holds a `-`: no other prefix yields a name of this set (where `<p>_<name>`
 * would: `shoal_eu_payloads` is the prefix `shoal.eu`'s). `obj://` references and result targets
 * naming any other bucket (another deployment's on a shared server) are refused.
 */
export function isDeploymentBucket(payloadBucket: string, bucket: string): boolean {
  if (bucket === payloadBucket) return true;
  const lower = payloadBucket.endsWith(PAYLOAD_BUCKET_SUFFIX) ? payloadBucket.slice(0, -PAYLOAD_BUCKET_SUFFIX.length) : null;
  return lower !== null && bucket.startsWith(`${lower}-`) && bucket.length > lower.length + 1;
}

export function natsNames(prefix: string = DEFAULT_SUBJECT_PREFIX): NatsNames {
  const p = checkPrefix(prefix);
  const upper = p.replace(/[.-]/g, '_').toUpperCase();
  const lower = p.replace(/[.-]/g, '_').toLowerCase();
  return Object.freeze({
    prefix: p,
    jobsStream: `${upper}_JOBS`,
    resultsStream: `${upper}_RESULTS`,
    deadLetterStream: `${upper}_DLQ`,
    statusBucket: `${lower}_jobs`,
    payloadBucket: `${lower}${PAYLOAD_BUCKET_SUFFIX}`,
    workerQueue: `${lower}_workers`,
    resultsSink: `${lower}_results_sink`,
    jobs: (primitive: Primitive, model: string) => `${p}.jobs.${primitive}.${modelToken(model)}`,
    allJobs: () => `${p}.jobs.>`,
    consumer: (primitive: Primitive, model: string) => `${lower}_${primitive}_${modelToken(model)}`,
    results: (jobId: string, part: number) => `${p}.results.${checkJobId(jobId)}.${part}`,
    allResults: () => `${p}.results.>`,
    jobResults: (jobId: string) => `${p}.results.${checkJobId(jobId)}.*`,
    deadLetter: (primitive: Primitive, model: string) => `${p}.dlq.${primitive}.${modelToken(model)}`,
    allDeadLetters: () => `${p}.dlq.>`,
    resident: (operation: RpcOperation, model: string) => `${p}.rpc.resident.${operation}.${modelToken(model)}`,
    serving: (operation: RpcOperation, model: string) => `${p}.rpc.serving.${operation}.${modelToken(model)}`,
    workers: () => `${p}.rpc.workers`,
  });
}
