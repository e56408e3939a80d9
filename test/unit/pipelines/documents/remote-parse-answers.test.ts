import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseTaskCheck, pagesKey } from '../../../../adapters/nats/ingest/parse-task-token.js';
import type { ParseTaskInput } from '../../../../adapters/nats/ingest/parse-client.js';
import type { DocumentStatus, ParseTask, StoredPages } from '../../../../adapters/protocol/ingest.js';
import { WIRE_VERSION } from '../../../../adapters/protocol/jobs.js';
import { RemoteParseReader, type ParseTaskPort } from '../../../../pipelines/documents/remote-parse.js';

/**
 * The coordinator's own check (remote-parse.ts): of the `parsed`/`failed` statuses its watch
 * delivers, it takes only the one answering the task it published (same document id and task
 * digest). A status an earlier coordinator's task left under the run id (a run taken over), or
 * one anybody wrote, is ignored with a warning; the genuine answer after it is the one read.
 * Workers no longer write such statuses over a queued one (parse-task-standing.ts), so this is
 * checked here with a stand-in client whose watch the test feeds.
 */

const RUN = '5f0c2b1e-0000-4000-8000-000000000001';
const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/** A parse-task client in memory: tasks are recorded, statuses are whatever the test pushes into the watch. */
function standIn(): { port: ParseTaskPort; submitted: ParseTaskInput[]; push: (status: DocumentStatus) => void; pagesRead: string[] } {
  const submitted: ParseTaskInput[] = [];
  const pagesRead: string[] = [];
  const queue: DocumentStatus[] = [];
  let wake: (() => void) | null = null;
  const port: ParseTaskPort = {
    parseWorkerSeen: async () => true,
    submit: async (input) => {
      submitted.push(input);
    },
    async *watch(_run, signal) {
      while (!signal.aborted) {
        const next = queue.shift();
        if (next !== undefined) {
          yield next;
          continue;
        }
        await new Promise<void>((resolve) => {
          wake = resolve;
          signal.addEventListener('abort', () => resolve(), { once: true });
        });
      }
    },
    pages: async (status: DocumentStatus, task: Pick<ParseTask, 'run_id' | 'doc' | 'token'>): Promise<StoredPages> => {
      pagesRead.push(status.pages_ref ?? '');
      return { v: WIRE_VERSION, document_id: status.document_id, type: 'text', pages: [{ page: 1, text: `pages of ${pagesKey(task)}`, ocr: false }] };
    },
    forget: async () => undefined,
    putDocument: async () => undefined,
  };
  return {
    port,
    submitted,
    pagesRead,
    push: (status) => {
      queue.push(status);
      wake?.();
    },
  };
}

describe('RemoteParseReader: only the answer to its own task', () => {
  it('ignores a parsed status of another task under its run id (warning), then reads the genuine answer', async () => {
    const text = 'The lighthouse keeper logs every passing ship.';
    const client = standIn();
    const warnings: string[] = [];
    const reader = new RemoteParseReader(client.port, RUN, { ocr: 'auto', ocrModel: 'ppocr-v4', ocrDpi: 150, furniture: 'drop', maxBytes: 1024, maxPages: 10 }, { onWarning: (message) => warnings.push(message) });
    const source = { uri: 'doc-a', text };
    reader.start([{ uri: 'doc-a', load: async () => ({ source, bytes: new TextEncoder().encode(text) }) }], () => false);
    try {
      const parsing = reader.parse(source);
      await expect.poll(() => client.submitted.length).toBe(1);
      const task = client.submitted[0];
      if (task?.token === undefined) throw new Error('no token in the published task');
      const base = { v: WIRE_VERSION, run_id: RUN, doc: 0, source: 'doc-a', document_id: sha256(text), state: 'parsed', pages: 1, updated_at: new Date().toISOString() } as const;
      // Left by an earlier coordinator's task of this run: same document, another task digest.
      client.push({ ...base, task: sha256('an earlier token'), pages_ref: 'obj://p/ingest/earlier.pages.json' });
      client.push({ ...base, task: parseTaskCheck({ token: task.token }), pages_ref: `obj://p/${pagesKey({ run_id: RUN, doc: 0, token: task.token })}` });
      const outcome = await parsing;
      expect(outcome.ok).toBe(true);
      expect(client.pagesRead).toEqual([`obj://p/${pagesKey({ run_id: RUN, doc: 0, token: task.token })}`]);
      expect(reader.ignored).toBe(1);
      expect(warnings.some((warning) => warning.includes('answers no parse task this coordinator published'))).toBe(true);
    } finally {
      await reader.close();
    }
  });
});
