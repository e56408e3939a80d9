import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { parseWith } from '../../protocol/validate.js';
import type { CreatedSession } from '../../runtime/ort-session.js';
import type { FloatTensor } from '../../runtime/tensors.js';
import { TokenizerConfigJson } from '../../tokenizers/tokenizer-files.js';
import type { TextTokenizer } from '../../tokenizers/text-tokenizer.js';
import type { TextBatch } from '../text/collate.js';
import type { FamilyAdapter, ItemOutput, PrepContext, Prepared, PreparedText, PrepareRequest, PrepItem, RunOptions } from '../family.js';
import { requireTokenizer } from '../family.js';
import { ColbertMetadata } from '../model-files.js';
import { l2Normalize } from '../text/pooling.js';
import type { ModelProfile } from '../profile.js';
import { familyOptions, openRunner, requireTextBatch, TextRunner, type TextForward } from '../text/text-runner.js';
import { colbertSpec } from './spec.js';

/**
 * ColBERT late interaction (colbert-ir/colbertv2.0, answerai-colbert-small, jina-colbert
 * conventions): one vector per token, scored with MaxSim (similarity.ts). Queries and documents
 * are encoded differently, so the item's role picks the encoding:
 * - query: '. ' + text, kept to query_maxlen with [CLS] .. [SEP], the '.' at position 1 replaced by
 *   the query marker, then padded to exactly query_maxlen with [MASK] (query augmentation); every
 *   position's vector is returned, the [MASK] ones being the expansion terms;
 * - document: '. ' + text, kept to doc_maxlen, document marker at position 1, padded per batch
 *   with [PAD]; padding and punctuation (the skiplist) vectors are dropped.
 * Parameters come from the checkpoint's artifact.metadata; token ids are resolved at detection so
 * the model thread needs no tokenizer.
 */

export const ColbertOptions = z.strictObject({
  /** Fixed query length, [MASK] expansion included. */
  queryMaxLength: z.number().int().min(3),
  /** Default document length (a request's max_length overrides it, see documentLength). */
  docMaxLength: z.number().int().min(3),
  queryMarkerId: z.number().int().nonnegative(),
  documentMarkerId: z.number().int().nonnegative(),
  /** [MASK] id, the query padding. */
  maskId: z.number().int().nonnegative(),
  /** Drop the document vectors of punctuation tokens (the skiplist). */
  maskPunctuation: z.boolean(),
  /** Token ids of the ASCII punctuation characters, resolved with the model's tokenizer. */
  skiplist: z.array(z.number().int().nonnegative()),
  /** true: the [MASK] padding of queries is attended to (attention 1), as in jina-colbert. */
  attendToMaskTokens: z.boolean(),
  /** Vector size from artifact.metadata, checked against the graph when known. */
  dim: z.number().int().positive().nullable(),
  similarity: z.enum(['cosine', 'l2']),
  /** ONNX output holding the projected token vectors; default last_hidden_state or the only output. */
  output: z.string().optional(),
});
export type ColbertOptions = z.infer<typeof ColbertOptions>;

/** Python's string.punctuation, the characters ColBERT's skiplist is built from. */
const PUNCTUATION = '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~';
const TEXT_PREFIX = '. ';
/** Where the marker goes: right after the leading [CLS], replacing the '.' of TEXT_PREFIX. */
const MARKER_POSITION = 1;
const TOKEN_OUTPUTS = ['last_hidden_state', 'token_embeddings', 'contextual'];

function colbertOptions(profile: ModelProfile): ColbertOptions {
  return familyOptions(ColbertOptions, profile, 'colbert');
}

function requireTokenId(tokenizer: TextTokenizer, token: string, what: string): number {
  const id = tokenizer.tokenToId(token);
  if (id === undefined) {
    throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `the ColBERT ${what} token "${token}" is not in the tokenizer's vocabulary; fix artifact.metadata or set options in the catalog`);
  }
  return id;
}

/**
 * ColBERT's skiplist holds, per punctuation character, the first id the tokenizer gives it
 * (a single token in WordPiece vocabularies); the same rule keeps indexes built by ColBERT valid.
 */
function punctuationIds(tokenizer: TextTokenizer): number[] {
  const ids = new Set<number>();
  for (const symbol of PUNCTUATION) {
    const first = tokenizer.segmentIds(symbol)[0];
    if (first !== undefined) ids.add(first);
  }
  return [...ids].sort((a, b) => a - b);
}

/**
 * Document length: doc_maxlen unless the request set its own max_length. The engine hands over
 * the effective length (request value or the profile's generic maxLength), so a value that differs
 * from the profile's is a request override and wins; a catalog `max_length` only changes the
 * profile's and does not reach documents (set `options.docMaxLength` instead). Never beyond what
 * the position embeddings allow. Queries always have query_maxlen positions: their [MASK]
 * expansion is part of the model.
 */
function documentLength(profile: ModelProfile, options: ColbertOptions, requested: number): number {
  const length = requested !== profile.maxLength ? requested : options.docMaxLength;
  const capped = profile.hardMaxLength === null ? length : Math.min(length, profile.hardMaxLength);
  if (capped < 3) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `max_length ${capped} is too short for ColBERT documents: [CLS], the marker and [SEP] need 3 tokens`);
  }
  return capped;
}

function encodeMarked(context: PrepContext, item: PrepItem, maxLength: number, marker: number, exactLength: boolean) {
  const lowercase = context.profile.tokenizer?.lowercase === true;
  const text = TEXT_PREFIX + (lowercase ? item.text.toLowerCase() : item.text);
  const encoded = requireTokenizer(context.tokenizer, context.profile.id).encode(text, exactLength ? { maxLength, exactLength: true } : { maxLength });
  const ids = encoded.ids.slice();
  ids[MARKER_POSITION] = marker;
  return { ids, truncated: encoded.truncated, length: encoded.length };
}

function prepareQuery(context: PrepContext, item: PrepItem, options: ColbertOptions, exactLength: boolean): PreparedText {
  const encoded = encodeMarked(context, item, options.queryMaxLength, options.queryMarkerId, exactLength);
  const real = encoded.ids.length;
  const ids = encoded.ids.concat(new Array<number>(options.queryMaxLength - real).fill(options.maskId));
  const attention = options.attendToMaskTokens ? null : ids.map((_, t) => (t < real ? 1 : 0));
  return { kind: 'text', ids, typeIds: null, attention, truncated: encoded.truncated, length: encoded.length, promptTokens: 0, role: 'query' };
}

function prepareDocument(context: PrepContext, item: PrepItem, options: ColbertOptions, maxLength: number, exactLength: boolean): PreparedText {
  const encoded = encodeMarked(context, item, maxLength, options.documentMarkerId, exactLength);
  return { kind: 'text', ids: encoded.ids, typeIds: null, attention: null, truncated: encoded.truncated, length: encoded.length, promptTokens: 0, role: 'document' };
}

function prepareColbert(context: PrepContext, request: PrepareRequest): PreparedText[] {
  const options = colbertOptions(context.profile);
  const exactLength = request.exactLength === true;
  // Only documents read max_length: a query-only request is never refused for it.
  const hasDocuments = request.items.some((item) => item.role !== 'query');
  const docLength = hasDocuments ? documentLength(context.profile, options, request.maxLength) : options.docMaxLength;
  return request.items.map((item) =>
    item.role === 'query' ? prepareQuery(context, item, options, exactLength) : prepareDocument(context, item, options, docLength, exactLength),
  );
}

/** Vectors of the given columns of one batch row, each L2-normalized when asked. */
function rowVectors(hidden: FloatTensor, row: number, columns: readonly number[], normalize: boolean): number[][] {
  const seqLen = hidden.dims[1] ?? 0;
  const dim = hidden.dims[2] ?? 0;
  return columns.map((column) => {
    const start = (row * seqLen + column) * dim;
    const vector = hidden.data.slice(start, start + dim);
    if (normalize) l2Normalize(vector);
    return Array.from(vector);
  });
}

class ColbertRunner extends TextRunner {
  protected readonly family = 'colbert';
  readonly #skip: ReadonlySet<number>;

  constructor(profile: ModelProfile, created: CreatedSession, options: ColbertOptions) {
    super(profile, created, { holds: 'the ColBERT token vectors', preferred: TOKEN_OUTPUTS, configured: options.output }, (graphDim) => graphDim ?? options.dim);
    this.#skip = new Set(options.maskPunctuation ? options.skiplist : []);
    const graphDim = this.info.dimension;
    if (graphDim !== null && options.dim !== null && graphDim !== options.dim) {
      throw new ShoalError(
        ErrorCode.MODEL_LOAD_FAILED,
        `${profile.id}: artifact.metadata says dim ${options.dim} but ONNX output ${this.output} has ${graphDim}; export the graph with the linear projection`,
      );
    }
  }

  /**
   * Queries and documents follow different padding rules ([MASK] to a fixed length vs [PAD] per
   * batch), and the engine's batches may mix roles (encode takes a role per item): each role runs
   * as its own sub-batch, so a query never sees padding it would not have had alone.
   */
  override async run(batch: Prepared[], options: RunOptions): Promise<ItemOutput[]> {
    const items = requireTextBatch(batch, 'colbert');
    const outputs = new Array<ItemOutput>(items.length);
    for (const role of ['query', 'document'] as const) {
      const rows = items.flatMap((item, index) => (item.role === role ? [index] : []));
      if (rows.length === 0) continue;
      const group = rows.map((index) => items[index]).filter((item): item is PreparedText => item !== undefined);
      const read = this.read(group, await this.forward(group), options);
      read.forEach((output, row) => {
        const index = rows[row];
        if (index !== undefined) outputs[index] = output;
      });
    }
    return outputs;
  }

  protected override async forward(group: readonly PreparedText[]): Promise<TextForward> {
    const forward = await super.forward(group);
    const { collated, output: hidden } = forward;
    if (hidden.dims.length !== 3 || hidden.dims[0] !== collated.batchSize || hidden.dims[1] !== collated.seqLen) {
      throw new ShoalError(
        ErrorCode.INFERENCE_FAILED,
        `${this.profile.id}: ONNX output ${this.output} has shape [${hidden.dims.join(', ')}], expected [${collated.batchSize}, ${collated.seqLen}, dim]`,
      );
    }
    return forward;
  }

  /** One role's items: every query position, or the document positions off the skiplist. */
  protected read(group: readonly PreparedText[], { collated, output: hidden }: TextForward, options: RunOptions): ItemOutput[] {
    const normalize = options.normalize ?? true;
    return group.map((item, row) => {
      const columns = item.role === 'query' ? this.#queryColumns(item, collated, row) : this.#documentColumns(item, collated, row);
      return { multivector: rowVectors(hidden, row, columns, normalize) };
    });
  }

  /** All query positions are kept: [CLS], marker, text, [SEP] and the [MASK] expansion. */
  #queryColumns(item: PreparedText, collated: TextBatch, row: number): number[] {
    const start = collated.rowStart[row] ?? 0;
    return item.ids.map((_, t) => start + t);
  }

  /** Document positions minus padding (never in item.ids) and skiplist tokens. */
  #documentColumns(item: PreparedText, collated: TextBatch, row: number): number[] {
    const start = collated.rowStart[row] ?? 0;
    const columns: number[] = [];
    item.ids.forEach((id, t) => {
      if (!this.#skip.has(id)) columns.push(start + t);
    });
    return columns;
  }
}

export const colbert: FamilyAdapter<'colbert'> = {
  name: 'colbert',
  ...colbertSpec,

  async detectOptions(evidence, maybeTokenizer) {
    const tokenizer = requireTokenizer(maybeTokenizer, evidence.folder.dir);
    const metadata = (await evidence.folder.json('artifact.metadata', ColbertMetadata)) ?? parseWith(ColbertMetadata, {}, 'ColBERT defaults');
    const lead = tokenizer.info.template.single[0];
    if (lead?.kind !== 'special' || lead.ids.length !== 1) {
      throw new ShoalError(
        ErrorCode.MODEL_LOAD_FAILED,
        `ColBERT needs a tokenizer that puts one special token ([CLS] or <s>) before the text, for the marker to follow it; ${evidence.folder.dir} has none`,
      );
    }
    const tokenizerConfig = await evidence.folder.json('tokenizer_config.json', TokenizerConfigJson);
    const maskToken = tokenizerConfig?.mask_token ?? '[MASK]';
    return {
      queryMaxLength: metadata.query_maxlen,
      docMaxLength: metadata.doc_maxlen,
      queryMarkerId: requireTokenId(tokenizer, metadata.query_token_id, 'query marker'),
      documentMarkerId: requireTokenId(tokenizer, metadata.doc_token_id, 'document marker'),
      maskId: requireTokenId(tokenizer, maskToken, 'mask'),
      maskPunctuation: metadata.mask_punctuation,
      skiplist: punctuationIds(tokenizer),
      attendToMaskTokens: metadata.attend_to_mask_tokens,
      dim: metadata.dim ?? null,
      similarity: metadata.similarity,
    };
  },

  prepare: prepareColbert,

  async createRunner(context) {
    const options = colbertOptions(context.profile);
    if (options.similarity !== 'cosine') {
      throw new ShoalError(
        ErrorCode.MODEL_LOAD_FAILED,
        `${context.profile.id}: ColBERT similarity "${options.similarity}" is not supported (Shoal scores with cosine MaxSim); set options.similarity to "cosine" in the catalog to score it that way`,
      );
    }
    return openRunner(context, (created) => new ColbertRunner(context.profile, created, options));
  },
};
