import { documentNames as protocolNames } from '../../adapters/protocol/documents.js';
import { natsNames } from '../../adapters/protocol/subjects.js';

/**
 * The NATS names of the document workers' topology (`shoal worker --documents`) as the chart
 * and the permission file spell them, derived from the prefix forms Shoal's own code derives
 * (adapters/protocol/documents.ts), in the shape the chart tests compare.
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
  const names = protocolNames(natsNames(prefix));
  return {
    stream: names.stream,
    subjects: names.allSubjects(),
    consumer: (pipeline) => names.consumer(pipeline),
    subject: (pipeline) => names.subject(pipeline),
    runsStream: names.runsStream,
    runsConsumer: names.runsConsumer,
    runOpen: names.runsOpen,
    eventsStream: names.eventsStream,
    events: names.allEvents(),
  };
}
