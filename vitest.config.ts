import { defineConfig } from 'vitest/config';

/**
 * Three projects, each one file at a time, that `npm test` (scripts/test-lanes.mjs) runs as three
 * vitest processes side by side. Inference runs in worker threads with their own ORT thread pools,
 * so many test files at once on a 2-core machine only make each one slower and flakier; but one
 * file at a time left the machine idle most of the time (38 % busy over a sample of the 30-minute
 * sequential run): many files wait on child processes, servers and outage timers. The NATS
 * integration files go with the unit, conformance, deploy and reliability files so that the two
 * main lanes take about the same time; the third holds the files that mostly wait out a store or a
 * worker being down (about 190 s of file time, two thirds of it fixed outage timers), which
 * otherwise lengthened the first lane by that much, and the document files listed below. `isolate: false` reuses a lane's process and
 * its loaded modules from file to file (a fork and fresh imports cost about 1.5 s a file; 1,800 →
 * 1,370 s for the whole suite in one lane); no test file changes process-wide state.
 * `npx vitest run` alone runs the projects one after the other.
 */
const NATS_INTEGRATION = 'test/integration/*nats*.test.ts';
/** Files that mostly wait: stores stopped for fixed outages, a worker scaled to zero and back. */
const OUTAGES = ['test/reliability/*outage*.test.ts', 'test/deploy/scale-to-zero.test.ts'];
/**
 * Document files that go with them, so the three lanes take about as long (file seconds in one
 * run: units-and-nats 663, integration 782, outages 186 before; about 590 / 600 / 450 after): the
 * 16-PDF parse and OCR files (CPU-heavy beside files that mostly wait) and three NATS ingest files.
 */
const DOCUMENTS = [
  'test/integration/documents-parse.test.ts',
  'test/integration/ocr.test.ts',
  'test/integration/ingest-interrupt-summary.test.ts',
  'test/integration/ingest-nats-operations.test.ts',
  'test/integration/ingest-nats-kill.test.ts',
  'test/integration/nats-sink-index.test.ts',
];
/** A project's own exclude replaces this one, so the integration project names it again. */
const EXCLUDE = ['dist/**', 'node_modules/**', 'scratch/**'];

export default defineConfig({
  test: {
    exclude: EXCLUDE,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    isolate: false,
    projects: [
      {
        extends: true,
        test: {
          name: 'units-and-nats',
          include: ['test/unit/**/*.test.ts', 'test/conformance/**/*.test.ts', 'test/deploy/**/*.test.ts', 'test/reliability/**/*.test.ts', NATS_INTEGRATION],
          exclude: [...EXCLUDE, ...OUTAGES, ...DOCUMENTS],
          fileParallelism: false,
        },
      },
      {
        extends: true,
        test: {
          name: 'outages-and-documents',
          // test/cluster: a 3-server JetStream cluster with workers as child processes (document-jobs-cluster.test.ts).
          include: [...OUTAGES, ...DOCUMENTS, 'test/cluster/**/*.test.ts'],
          fileParallelism: false,
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          exclude: [...EXCLUDE, NATS_INTEGRATION, ...DOCUMENTS],
          fileParallelism: false,
        },
      },
    ],
  },
});
