import { randomUUID } from 'node:crypto';
import { open, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { makeDirectory } from './directories.js';

/**
 * Writes `content` (text, bytes, or byte chunks in order, also as a stream) to `target` so that a reader sees the
 * old file or the whole new one, never part of it: a temporary file in the same folder (a name of its own per call, so two writers of one
 * target in one process do not share it), flushed to disk, then renamed over the target. The
 * temporary file is removed when anything fails; the error is the file system's own, for the
 * caller to word.
 */
export async function writeFileAtomically(target: string, content: string | Uint8Array | Iterable<Uint8Array> | AsyncIterable<Uint8Array>): Promise<void> {
  const chunks = typeof content === 'string' ? [Buffer.from(content)] : content instanceof Uint8Array ? [content] : content;
  const temporary = `${target}.tmp-${process.pid}-${randomUUID()}`;
  try {
    await makeDirectory(dirname(target));
    const handle = await open(temporary, 'w');
    try {
      for await (const chunk of chunks) await handle.write(chunk);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, target);
  } catch (error) {
    // Clean-up only: when the folder itself is unusable there is no temporary file to remove.
    await rm(temporary, { force: true }).catch(() => undefined);
    throw error;
  }
}
