import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { readGraphIo, type GraphTensor } from './graph-io.js';
import { isPastInput, type PastInput } from './kv-cache.js';
import type { HfConfig } from './model-files.js';

/** Reads a decoder graph's KV-cache inputs and the dims to feed them empty (see kv-cache.ts). */

const ELEM_FLOAT = 1;
const ELEM_FLOAT16 = 10;

function configHeads(config: HfConfig | undefined): { heads: number | null; headDim: number | null } {
  const heads = config?.num_key_value_heads ?? config?.num_attention_heads ?? null;
  const queryHeads = config?.num_attention_heads;
  const hidden = config?.hidden_size;
  const derived = queryHeads !== undefined && hidden !== undefined && hidden % queryHeads === 0 ? hidden / queryHeads : null;
  return { heads, headDim: config?.head_dim ?? derived };
}

function describePast(input: GraphTensor, config: HfConfig | undefined, graph: string): PastInput {
  const dtype = input.elemType === ELEM_FLOAT ? 'float32' : input.elemType === ELEM_FLOAT16 ? 'float16' : null;
  if (dtype === null) {
    throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${graph}: KV-cache input ${input.name} has element type ${input.elemType}; Shoal feeds float32 or float16 past tensors`);
  }
  if (input.shape.length !== 4) {
    throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${graph}: KV-cache input ${input.name} has ${input.shape.length} axes, expected [batch, kv_heads, past, head_dim]`);
  }
  const fallback = configHeads(config);
  const heads = input.shape[1] ?? fallback.heads;
  const headDim = input.shape[3] ?? fallback.headDim;
  if (heads === null || headDim === null) {
    throw new ShoalError(
      ErrorCode.MODEL_LOAD_FAILED,
      `${graph}: KV-cache input ${input.name} leaves its head axes symbolic and config.json declares no num_key_value_heads/head_dim`,
    );
  }
  return { name: input.name, dtype, heads, headDim };
}

/** The past inputs of a graph file, with the dims to feed them empty ([] for a graph without a cache). */
export async function detectPastInputs(graphPath: string, config: HfConfig | undefined): Promise<PastInput[]> {
  // A graph that cannot be read is the load's to report (MODEL_LOAD_FAILED for the request or job
  // part that needs it), as before this detection existed: a worker must still start and serve its
  // other models, and dead-letter the parts of this one.
  const io = await readGraphIo(graphPath).catch((): null => null);
  if (io === null) return [];
  return io.inputs.filter((input) => isPastInput(input.name)).map((input) => describePast(input, config, graphPath));
}
