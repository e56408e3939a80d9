import { connectNats } from '../../../adapters/nats/connection/connection.js';
import { JobsClient } from '../../../adapters/nats/jobs/jobs-client.js';

/**
 * A submitter to kill mid-submit (crash.test.ts): publishes one job of many one-item parts, slowly
 * (a small publish window), so the test can SIGKILL it with part of the job published.
 * Arguments: <nats-url> <prefix> <job-id> <model> <items>.
 */

const [url = '', prefix = '', jobId = '', model = '', count = '20000'] = process.argv.slice(2);
const nc = await connectNats({ servers: [url], retryFirstConnect: false });
const jobs = await JobsClient.open(nc, { topology: { prefix }, publishWindow: 4 });
const items = Array.from({ length: Number(count) }, (_, i) => `item ${i}`);
process.stdout.write('submitting\n');
await jobs.submit({ job_id: jobId, primitive: 'encode', request: { model, items }, part_items: 1 });
process.stdout.write('submitted\n');
await nc.close();
