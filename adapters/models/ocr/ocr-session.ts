import { join } from 'node:path';
import { readOnnx, serializeOnnx } from '../../quantize/onnx-file.js';
import { createSession, type CreatedSession } from '../../runtime/ort-session.js';
import type { RunnerContext } from '../family.js';
import { addBestClass, fusePaddleGraph, type FuseReport } from './ocr-graph.js';

/**
 * Opens one OCR stage's graph (model thread). A float graph is read, simplified in memory by
 * fusePaddleGraph (exact: same outputs up to float rounding, see ocr-graph.ts) and handed to
 * onnxruntime as bytes — tens of milliseconds for PP-OCR's 1–11 MB graphs, so nothing is cached
 * on disk. A graph the rewrite finds nothing in, and any precision other than fp32 (the int8
 * path quantizes and checks the source graph: adapters/models/precision), go through the
 * context's ordinary opener.
 */

export interface OpenedStage {
  created: CreatedSession;
  /** What the rewrite fused; null when the graph was opened as is. */
  fused: FuseReport | null;
}

const fusedAnything = (report: FuseReport): boolean => Object.values(report).some((count) => count > 0);

/**
 * `bestClass`: the stage is the recognizer; a rewritten graph also gets its per-step best class
 * and probability as outputs (addBestClass), which the runner fetches when they are there.
 */
export async function openStage(context: RunnerContext, component: string, fuse: boolean, bestClass = false): Promise<OpenedStage> {
  const file = context.profile.onnx[component];
  if (!fuse || context.profile.precision !== 'fp32' || file === undefined) return { created: await context.openSession(component), fused: null };
  const loaded = await readOnnx(join(context.profile.dir, file));
  const report = fusePaddleGraph(loaded.model);
  if (!fusedAnything(report)) return { created: await context.openSession(component), fused: null };
  if (bestClass) addBestClass(loaded.model);
  const serialized = serializeOnnx(loaded.model, `${file}.data`);
  // Past protobuf's limit the graph would need an external-data file: open the source instead.
  if (serialized.external !== null) return { created: await context.openSession(component), fused: null };
  const graph = serialized.graph;
  return { created: await createSession(graph, { ...context.runtime, ...context.profile.runtime }), fused: report };
}
