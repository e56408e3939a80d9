import { modelToken, natsNames } from '../../adapters/protocol/subjects.js';

/**
 * The NATS names of the document workers' topology (`shoal worker --documents`) as the chart
 * and the permission file spell them, derived from the prefix forms Shoal's own code derives
 * (natsNames: `<UPPER>_JOBS`, `<lower>_jobs`) and its model-token escaping. The role is being
 * built beside the chart; once adapters/protocol names these, the tests should use its names.
 */
export interface DocumentNames {
  /** Work-queue stream of document jobs: `<prefix>.documents.>`. */
  stream: string;
  subjects: string;
  /** Durable pull consumer of one pipeline. */
  consumer(pipeline: string): string;
  /** Its filter subject. */
  subject(pipeline: string): string;
  runsStream: string;
  runsConsumer: string;
  runOpen: string;
  eventsStream: string;
  events: string;
}

export function documentNames(prefix: string): DocumentNames {
  const names = natsNames(prefix);
  const upper = names.jobsStream.slice(0, -'_JOBS'.length);
  const lower = names.statusBucket.slice(0, -'_jobs'.length);
  return {
    stream: `${upper}_DOCUMENTS`,
    subjects: `${prefix}.documents.>`,
    consumer: (pipeline) => `${lower}_documents_${modelToken(pipeline)}`,
    subject: (pipeline) => `${prefix}.documents.${modelToken(pipeline)}`,
    runsStream: `${upper}_RUNS`,
    runsConsumer: `${lower}_runs`,
    runOpen: `${prefix}.runs.open`,
    eventsStream: `${upper}_EVENTS`,
    events: `${prefix}.events.>`,
  };
}
