import type { Command } from 'commander';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { validateFilter } from '../../../adapters/sinks/filter.js';
import { LanceDbSink } from '../../../adapters/sinks/lancedb.js';
import type { SearchHit } from '../../../adapters/sinks/sink.js';
import { encodeDense } from '../../../pipelines/documents/stages/encode.js';
import type { CliApp } from '../app.js';
import { parseFlags, PositiveIntFlag } from '../line-options.js';

/**
 * `shoal search "QUERY"`: encodes the query (role `query`) with the model the index was built
 * with (stored by ingest; `--model` overrides), takes the k nearest chunks, optionally rescored
 * by a cross-encoder (`--rerank`), and prints one JSON line per hit, best first.
 */

const SearchFlags = z.strictObject({
  index: z.string().min(1).default('./shoal-index'),
  table: z.string().min(1).default('chunks'),
  k: PositiveIntFlag(1000).default(10),
  model: z.string().min(1).optional(),
  rerank: z.string().min(1).optional(),
  filter: z.string().optional(),
});

/** Candidates handed to the reranker per hit asked for (it can only reorder what it is given). */
const RERANK_CANDIDATES_PER_HIT = 4;
const MIN_RERANK_CANDIDATES = 50;

const EXAMPLE = `
Output lines: {"rank":1,"score":0.83,"id":"…","document_id":"…","source":"/docs/a.pdf","page":3,"text":"…"}

--filter takes an SQL where-clause over the metadata columns id, document_id, source, page, chunk,
text, start, end, heading, settings, entities, labels, ingested_at: comparisons (= <> != < <= > >=),
AND, OR, NOT, IN (...), LIKE, IS [NOT] NULL, BETWEEN, 'strings' and numbers.

Examples:
  $ shoal search "how do I reset the device?"
  $ shoal search "termination clause" --k 5 --filter "source LIKE '%contracts%' AND page <= 3"
  $ shoal search "revenue in 2023" --rerank cross-encoder/ms-marco-MiniLM-L6-v2`;

function line(rank: number, hit: SearchHit): string {
  const { row } = hit;
  return `${JSON.stringify({ rank, score: Math.round(hit.score * 1e6) / 1e6, id: row.id, document_id: row.document_id, source: row.source, page: row.page, text: row.text })}\n`;
}

export function registerSearch(program: Command, app: CliApp): void {
  program
    .command('search')
    .summary('query an index built by shoal ingest')
    .description('Find the chunks nearest to a query in an index built by `shoal ingest`; one JSON line per hit.')
    .argument('<query>', 'the query text')
    .option('--index <dir>', 'LanceDB folder (default: ./shoal-index)')
    .option('--table <name>', 'table (default: chunks)')
    .option('-k, --k <n>', 'hits to return (default: 10)')
    .option('-m, --model <model>', 'query encoder (default: the model the index was built with)')
    .option('--rerank <model>', 'rescore the candidates with this cross-encoder')
    .option('--filter <expr>', 'SQL where-clause over metadata columns (see below)')
    .addHelpText('after', EXAMPLE)
    .action(async (query: string, _options: unknown, self: Command) => {
      const flags = parseFlags(SearchFlags, self);
      if (query.trim() === '') throw new ShoalError(ErrorCode.INVALID_INPUT, 'the query is empty');
      const filter = flags.filter === undefined ? undefined : validateFilter(flags.filter);
      const config = app.config(self);
      const sink = new LanceDbSink({ dir: flags.index, table: flags.table });
      const progress = app.progress(config);
      try {
        const spec = await sink.describe();
        if (spec === null) throw new ShoalError(ErrorCode.NOT_FOUND, `no table ${flags.table} in ${flags.index}: run shoal ingest first`);
        const model = flags.model ?? spec.metadata.model;
        if (model === undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, 'the index does not record its model: give --model');
        const hits = await app.withEngine(config, progress, async (engine) => {
          const call = { signal: app.io.signal };
          // A query is interactive work: the interactive lane goes into the very next batch.
          const [vector] = await encodeDense(engine, [query], { model, role: 'query', priority: 'interactive' }, call);
          if (vector === undefined) return [];
          if (vector.length !== spec.dimension) {
            throw new ShoalError(ErrorCode.CONFIG_INVALID, `model ${model} gives ${vector.length}-dimensional vectors, the index holds ${spec.dimension}`);
          }
          const k = flags.rerank === undefined ? flags.k : Math.max(flags.k * RERANK_CANDIDATES_PER_HIT, MIN_RERANK_CANDIDATES);
          const candidates = await sink.search(Array.from(vector), { k, filter });
          if (flags.rerank === undefined || candidates.length === 0) return candidates;
          // The candidates (at least MIN_RERANK_CANDIDATES pairs) are a batch, not a query: bulk lane.
          const scored = await engine.score({ model: flags.rerank, query, items: candidates.map((hit) => ({ text: hit.row.text })), priority: 'bulk' }, call);
          return scored.scores.slice(0, flags.k).flatMap((entry) => {
            const hit = candidates[entry.index];
            return hit === undefined ? [] : [{ row: hit.row, score: entry.score }];
          });
        });
        progress.stop();
        hits.forEach((hit, index) => app.io.stdout.write(line(index + 1, hit)));
      } finally {
        progress.stop();
        await sink.close();
      }
    });
}
