import type { Command } from 'commander';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { validateFilter } from '../../../adapters/stores/shared/filter.js';
import type { SearchHit } from '../../../adapters/stores/store.js';
import { GROUP_BY, hitLine, SEARCH_MODES, searchIndex, type SearchQuery } from '../../../pipelines/documents/search.js';
import { CHUNKS_PER_DOCUMENT, searchDocuments } from '../../../pipelines/documents/search-groups.js';
import type { CliApp } from '../app.js';
import { INDEX_HELP, openIndex } from '../index-ref.js';
import { resolveIndexTarget } from '../index-target.js';
import { missingTableError } from '../../../pipelines/documents/index-admin.js';
import { parseFlags, PositiveIntFlag } from '../line-options.js';

/**
 * `shoal search "QUERY"`: encodes the query (role `query`) with the model the index was built
 * with (stored by ingest; `--model` overrides), takes the k nearest chunks, optionally rescored
 * by a cross-encoder (`--rerank`), and prints one JSON line per hit, best first. `--mode` picks
 * dense, sparse, full-text or hybrid (fused) retrieval (pipelines/documents/search.ts);
 * `--group-by document` prints one line per document instead (pipelines/documents/search-groups.ts).
 */

const SearchFlags = z.strictObject({
  index: z.string().min(1).default('./shoal-index'),
  table: z.string().min(1).default('chunks'),
  k: PositiveIntFlag(1000).optional(),
  /** `shoal classify`'s spelling of the same count, accepted here so one habit works everywhere. */
  topK: PositiveIntFlag(1000).optional(),
  model: z.string().min(1).optional(),
  rerank: z.string().min(1).optional(),
  filter: z.string().optional(),
  mode: z.enum(SEARCH_MODES).optional(),
  groupBy: z.enum(GROUP_BY).optional(),
});


const EXAMPLE = `
Output lines: {"rank":1,"score":0.83,"id":"…","document_id":"…","source":"/docs/a.pdf","page":3,"text":"…",
               "heading":"2. Terms","chunk":7,"start":5120,"end":5884,"metadata":{"title":"…"}}
With --group-by document, one line per document (k counts documents), its best chunks inside:
  {"rank":1,"score":0.83,"document_id":"…","source":"/docs/a.pdf","hits":[{"rank":1,…},{"rank":4,…}]}

--filter takes an SQL where-clause over the columns id, document_id, source, page, chunk,
text, start, end, heading, settings, entities, labels, ingested_at and the document metadata
fields metadata.<field> (title, mtime, size, mime of files; a record's own metadata):
comparisons (= <> != < <= > >=), AND, OR, NOT, IN (...), LIKE (columns only), IS [NOT] NULL,
BETWEEN, 'strings', numbers and true/false.

Examples:
  $ shoal search "how do I reset the device?"
  $ shoal search "termination clause" --k 5 --filter "source LIKE '%contracts%' AND page <= 3"
  $ shoal search "revenue in 2023" --rerank cross-encoder/ms-marco-MiniLM-L6-v2
  $ shoal search "error E1234" --mode sparse       # an index whose pipeline has encode.sparse
  $ shoal search "error E1234" --mode text        # full-text (BM25) over the chunk text
  $ shoal search "error E1234" --mode hybrid      # dense + full-text (+ sparse) fused
  $ shoal search "warranty terms" --group-by document --k 5
  $ shoal search "budget" --filter "metadata.year >= 2020 AND metadata.tag IN ('finance', 'ops')"

--mode text ranks chunks by their words (LanceDB: BM25 over its full-text index, built by the
first text search; pgvector: PostgreSQL's ts_rank); Chroma and Qdrant cannot rank by text and
refuse it. --mode hybrid fuses every ranking the index has (dense, sparse when the pipeline had an
encode.sparse model, full-text where the store has it) by reciprocal rank fusion (score = sum of
1/(60 + rank)). Default: hybrid on an index with sparse vectors, else dense. An index built with
an encode.multivector (ColBERT) model has its candidates rescored by MaxSim.`;

function line(rank: number, hit: SearchHit): string {
  return `${JSON.stringify(hitLine(rank, hit))}\n`;
}

export function registerSearch(program: Command, app: CliApp): void {
  program
    .command('search')
    .summary('query an index built by shoal ingest')
    .description('Find the chunks nearest to a query in an index built by `shoal ingest`; one JSON line per hit.')
    .argument('<query>', 'the query text')
    .option('--index <uri>', `${INDEX_HELP}, or a name of SHOAL_INDEXES (default: ./shoal-index)`)
    .option('--table <name>', 'table (default: chunks)')
    .option('-k, --k <n>', 'hits to return, 1 to 1000 (default: 10)')
    .option('--top-k <n>', 'the same as --k')
    .option('-m, --model <model>', 'query encoder (default: the model the index was built with)')
    .option('--rerank <model>', 'rescore the candidates with this cross-encoder')
    .option('--mode <mode>', 'dense, sparse, text or hybrid (default: hybrid when the index holds sparse vectors, else dense)')
    .option('--group-by <what>', `document: one line per document, k counting documents, up to ${CHUNKS_PER_DOCUMENT} of its chunks each`)
    .option('--filter <expr>', 'SQL where-clause over metadata columns (see below)')
    .addHelpText('after', EXAMPLE)
    .action(async (query: string, _options: unknown, self: Command) => {
      const flags = parseFlags(SearchFlags, self);
      if (flags.k !== undefined && flags.topK !== undefined && flags.k !== flags.topK) {
        throw new ShoalError(ErrorCode.INVALID_INPUT, `--k ${flags.k} and --top-k ${flags.topK} disagree: they are the same setting, give one`);
      }
      const k = flags.k ?? flags.topK ?? 10;
      if (query.trim() === '') throw new ShoalError(ErrorCode.INVALID_INPUT, 'the query is empty');
      const filter = flags.filter === undefined ? undefined : validateFilter(flags.filter);
      const config = app.config(self);
      const opened = openIndex(app, resolveIndexTarget(app, flags.index), flags.table);
      const { store: sink, display, table } = opened;
      const progress = app.progress(config);
      try {
        // Checked before an engine starts: a missing index fails at once.
        const spec = await sink.describe();
        // A mistyped --table names the tables there are (index-admin.ts).
        if (spec === null) throw await missingTableError(opened, display);
        // Another model of the same dimension is not refused (a renamed copy or a local folder of the
        // same model is legitimate), but a different model's query vectors rank at random: say so.
        const built = spec.metadata.model;
        if (flags.model !== undefined && built !== undefined && flags.model !== built && !config.quiet) {
          app.io.stderr.write(`warning: --model ${flags.model} is not the model ${display} was built with (${built}): unless it is the same model under another name, the scores mean nothing\n`);
        }
        const search: SearchQuery = { query, k, filter, model: flags.model, mode: flags.mode, rerank: flags.rerank, where: `${display} (table ${table})` };
        const call = { signal: app.io.signal };
        if (flags.groupBy === 'document') {
          const documents = await app.withEngine(config, progress, (engine) => searchDocuments(engine, sink, search, call));
          progress.stop();
          for (const document of documents) app.io.stdout.write(`${JSON.stringify(document)}\n`);
          return;
        }
        const hits = await app.withEngine(config, progress, (engine) => searchIndex(engine, sink, search, call));
        progress.stop();
        hits.forEach((hit, index) => app.io.stdout.write(line(index + 1, hit)));
      } finally {
        progress.stop();
        await sink.close();
      }
    });
}
