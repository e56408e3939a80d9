import { dimsOf, toInt, type ModelProto, type NodeProto } from './onnx-file.js';

/**
 * Facts read from a graph while it is decoded anyway, kept in the cache record so the fidelity
 * check can build valid inputs without decoding the graph again.
 */

/** Ops that pass token ids through unchanged in value (a Cast to int32 before the embedding lookup...). */
const PASS_THROUGH = new Set(['Cast', 'Reshape', 'Unsqueeze', 'Squeeze', 'Flatten', 'Identity']);

/**
 * Rows of the embedding table that the graph input `input` indexes (its vocabulary size), or null
 * when no Gather on a constant table reads it.
 */
export function embeddingRows(model: ModelProto, input = 'input_ids'): number | null {
  const graph = model.graph;
  if (graph === null || graph === undefined) return null;
  const tables = new Map((graph.initializer ?? []).map((t) => [t.name ?? '', t]));
  const producers = new Map<string, NodeProto>();
  for (const node of graph.node ?? []) for (const output of node.output ?? []) producers.set(output, node);
  const readsInput = (name: string): boolean => {
    let current = name;
    for (let hops = 0; hops < 8; hops++) {
      if (current === input) return true;
      const producer = producers.get(current);
      if (producer === undefined || !PASS_THROUGH.has(producer.opType ?? '')) return false;
      current = producer.input?.[0] ?? '';
    }
    return false;
  };
  let rows: number | null = null;
  for (const node of graph.node ?? []) {
    if (node.opType !== 'Gather' || (node.domain ?? '') !== '') continue;
    const axis = toInt(node.attribute?.find((a) => a.name === 'axis')?.i);
    const table = tables.get(node.input?.[0] ?? '');
    if (axis !== 0 || table === undefined || !readsInput(node.input?.[1] ?? '')) continue;
    const [first] = dimsOf(table);
    if (first !== undefined && dimsOf(table).length === 2) rows = Math.max(rows ?? 0, first);
  }
  return rows;
}
