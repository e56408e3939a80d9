/** Messages between the classifier and its search thread (search-thread.ts). */

export type SearchRequest =
  | {
      kind: 'load';
      key: string;
      /** The category matrix, shared (not copied) with the thread. */
      buffer: SharedArrayBuffer;
      rows: number;
      dim: number;
    }
  | { kind: 'search'; key: string; queries: Float32Array<ArrayBuffer>; count: number; k: number }
  | { kind: 'drop'; key: string };

export type SearchResponse = { kind: 'loaded' } | { kind: 'dropped' } | { kind: 'found'; indices: Int32Array<ArrayBuffer>; scores: Float32Array<ArrayBuffer>; k: number };
