import type { Command } from 'commander';
import { z } from 'zod';
import { DEFAULT_DOCUMENTS_PAGE, MAX_DOCUMENTS_OFFSET, MAX_DOCUMENTS_PAGE, MAX_SOURCE_CHARS } from '../../../adapters/protocol/index-admin.js';
import type { OpenedStore } from '../../../adapters/stores/open.js';
import { deleteDocument, indexStats, listDocuments, listTables } from '../../../pipelines/documents/index-admin.js';
import type { CliApp } from '../app.js';
import { INDEX_HELP, openIndex } from '../index-ref.js';
import { resolveIndexTarget } from '../index-target.js';
import { parseFlags } from '../line-options.js';
import { WholeNumberFlag } from '../../settings/flag-values.js';
import { formatIndexDeleted, formatIndexDocuments, formatIndexStats, formatIndexTables } from './index-admin-text.js';

/**
 * `shoal index stats|documents|delete SOURCE|tables`: what an index holds, without a LanceDB
 * script (pipelines/documents/index-admin.ts does the work, for the gateway's /v1/indexes routes
 * too). `--index` and `--table` as `shoal search` takes them (a configured SHOAL_INDEXES name
 * included); readable text by default, `--json` for one JSON object (the HTTP answer's shape).
 */

const Common = {
  index: z.string().min(1).default('./shoal-index'),
  table: z.string().min(1).default('chunks'),
  json: z.boolean().optional(),
};
const CommonFlags = z.strictObject(Common);
const DocumentsFlags = z.strictObject({
  ...Common,
  limit: WholeNumberFlag(1, MAX_DOCUMENTS_PAGE).optional(),
  offset: WholeNumberFlag(0, MAX_DOCUMENTS_OFFSET).optional(),
  sourcePrefix: z.string().min(1).max(MAX_SOURCE_CHARS).optional(),
});

const EXAMPLE = `
Examples:
  $ shoal index stats                          # ./shoal-index, table chunks
  $ shoal index documents --source-prefix /docs/contracts/ --limit 50
  $ shoal index delete /docs/old/report.pdf    # its chunks and state; the next ingest indexes it again
  $ shoal index tables --index postgres://shoal@db:5432/search --json
  $ SHOAL_INDEXES=docs=/srv/index shoal index stats --index docs

delete exits 1 with error [NOT_FOUND] when the table holds nothing of SOURCE (a second delete of
the same source says so too); it asks no confirmation: the source must be named exactly, as
shoal index documents lists it. An unknown --table is NOT_FOUND naming the tables there are.`;

function withCommon(command: Command): Command {
  return command
    .option('--index <uri>', `${INDEX_HELP}, or a name of SHOAL_INDEXES (default: ./shoal-index)`)
    .option('--table <name>', 'table (default: chunks)')
    .option('--json', 'print one JSON object on stdout');
}

/** Opens the index the flags name, runs `body`, closes it. */
async function onIndex<T>(app: CliApp, flags: { index: string; table: string }, body: (opened: OpenedStore) => Promise<T>): Promise<T> {
  const opened = openIndex(app, resolveIndexTarget(app, flags.index), flags.table);
  try {
    return await body(opened);
  } finally {
    await opened.store.close();
  }
}

function print<T>(app: CliApp, json: boolean | undefined, value: T, text: (value: T) => string): void {
  app.io.stdout.write(json === true ? `${JSON.stringify(value)}\n` : text(value));
}

export function registerIndexAdmin(program: Command, app: CliApp): void {
  const index = program
    .command('index')
    .summary('inspect or change an index: stats, documents, delete, tables')
    .description('See what an index built by `shoal ingest` holds, list its documents and tables, delete a document.');
  withCommon(index.command('stats').summary('rows, documents, model and settings of a table').description('Rows, documents, the model, dimension, distance and vector type, optional columns, size and last ingest of a table.'))
    .addHelpText('after', EXAMPLE)
    .action(async (_options: unknown, self: Command) => {
      const flags = parseFlags(CommonFlags, self);
      await onIndex(app, flags, async (opened) => print(app, flags.json, await indexStats(opened, opened.display), formatIndexStats));
    });
  withCommon(index.command('documents').summary('list the documents of a table, by source').description(`The documents of a table, ordered by source, one page at a time (--limit, default ${DEFAULT_DOCUMENTS_PAGE}, at most ${MAX_DOCUMENTS_PAGE}; --offset).`))
    .option('--limit <n>', `documents per page, 1 to ${MAX_DOCUMENTS_PAGE} (default: ${DEFAULT_DOCUMENTS_PAGE})`)
    .option('--offset <n>', 'documents to skip (default: 0; the next page\'s is printed)')
    .option('--source-prefix <prefix>', 'only sources starting with this')
    .addHelpText('after', EXAMPLE)
    .action(async (_options: unknown, self: Command) => {
      const flags = parseFlags(DocumentsFlags, self);
      await onIndex(app, flags, async (opened) =>
        print(app, flags.json, await listDocuments(opened, opened.display, { limit: flags.limit, offset: flags.offset, sourcePrefix: flags.sourcePrefix }), formatIndexDocuments),
      );
    });
  withCommon(index.command('delete').summary("remove a document's chunks and state").description('Remove one document (its chunks, then its state) from a table; the next shoal ingest of it indexes it again.'))
    .argument('<source>', 'the source exactly as shoal index documents lists it')
    .addHelpText('after', EXAMPLE)
    .action(async (source: string, _options: unknown, self: Command) => {
      const flags = parseFlags(CommonFlags, self);
      await onIndex(app, flags, async (opened) => print(app, flags.json, await deleteDocument(opened, opened.display, source), formatIndexDeleted));
    });
  withCommon(index.command('tables').summary('the tables of an index, with their rows').description('The tables Shoal wrote in the index (folder, database, server or prefix), with their row counts.'))
    .addHelpText('after', EXAMPLE)
    .action(async (_options: unknown, self: Command) => {
      const flags = parseFlags(CommonFlags, self);
      await onIndex(app, flags, async (opened) => print(app, flags.json, await listTables(opened, opened.display), formatIndexTables));
    });
}
