import { connectNats, redacted } from '../../../adapters/nats/connection/connection.js';
import type { Store } from '../../../adapters/stores/store.js';
import type { PipelineDefinition } from '../../../pipelines/documents/definition.js';
import { NatsIngest } from '../../../pipelines/documents/nats-ingest.js';
import type { IngestProgress, IngestSummary } from '../../../pipelines/documents/runner.js';
import type { PendingSource } from '../../../pipelines/documents/sources.js';
import type { StoreHealth } from '../../../pipelines/documents/store-health.js';
import { splitList} from '../../settings/environment.js';
import type { CliApp } from '../app.js';
import { printable } from '../printable.js';

/**
 * `shoal ingest --nats URL`: this process coordinates (reads the sources, publishes parse tasks,
 * chunks, submits encode jobs, commits through the sink); parsing runs on `shoal worker --parse`
 * processes and encoding on workers serving the encode model (pipelines/documents/nats-ingest.ts).
 * The run id is printed on stderr so its status can be read while it runs (`GET /v1/jobs/:id`).
 */

export interface NatsIngestCall {
  app: CliApp;
  nats: string;
  definition: PipelineDefinition;
  sink: Store;
  sources: readonly PendingSource[];
  force: boolean;
  onProgress: (progress: IngestProgress) => void;
  quiet: boolean;
  /** Wired into the sink and the S3 sources: the run's status shows `degraded` while one fails. */
  health: StoreHealth;
}

export async function ingestOverNats(call: NatsIngestCall): Promise<IngestSummary> {
  const { app, definition } = call;
  const servers = splitList(call.nats) ?? [call.nats];
  const nc = await connectNats({ ...app.settings.nats, servers, retryFirstConnect: false, name: 'shoal ingest' });
  try {
    // SHOAL_SUBJECT_PREFIX and SHOAL_STREAM_REPLICAS: the ingest stream and bucket are created here on a first run.
    const topology = app.settings.topology();
    const parseWorkerTimeoutMs = app.settings.parseWorkerTimeoutMs;
    const ingest = await NatsIngest.open(nc, { ...topology, parseWorkerTimeoutMs, heartbeatMs: app.settings.runHeartbeatMs });
    try {
      const runId = crypto.randomUUID();
      if (!call.quiet) app.io.stderr.write(`ingest run ${runId} over ${redacted(servers)}: parse tasks for workers started with --parse\n`);
      return await ingest.run(
        {
          runId,
          definition,
          sink: call.sink,
          index: definition.stages.write.index,
          force: call.force,
          signal: app.io.signal,
          onProgress: call.onProgress,
          health: call.health,
          // Not silenced by --quiet: without it a run with no parse worker waits with no word.
          onWarning: (message) => app.io.stderr.write(`warning: ${printable(message)}\n`),
        },
        call.sources,
      );
    } finally {
      await ingest.close();
    }
  } finally {
    await nc.drain().catch(() => nc.close());
  }
}
