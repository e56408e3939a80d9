import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
// Its type augmentation gives FastifyRequest `parts()`; the plugin is registered by routes/ingest.ts.
import type {} from '@fastify/multipart';
import type { FastifyRequest } from 'fastify';
import { sniffDocument } from '../../adapters/documents/index.js';
import { ErrorCode, isShoalError, ShoalError } from '../../adapters/protocol/errors.js';
import { MAX_DOCUMENT_BYTES } from '../../adapters/protocol/limits.js';

/**
 * `POST /v1/ingest` as `multipart/form-data`: one or more files plus the request's other fields
 * (`index`, `model`, `pipeline`, `force`, `prune`, `job_id`, and `sources` as JSON for inline
 * records or references beside the files). Each file is streamed to a private temp folder while
 * its SHA-256 is computed, never held whole in memory, within limits: a file over the document
 * limit (100 MiB) or an upload over MAX_UPLOAD_BYTES is 413 INPUT_TOO_LARGE, a file of no kind the
 * pipeline reads (checked on its first bytes by the same sniffer the parse stage uses) is 415,
 * an empty one 422. The route then stages each file in the deployment's object store under its
 * hash (IngestApi.stage), so the run reads it as any `obj://` source, named by its file name.
 */

/** Files in one upload. */
export const MAX_UPLOAD_FILES = 32;
/** All files of one upload together (each is also at most MAX_DOCUMENT_BYTES). */
export const MAX_UPLOAD_BYTES = 512 * 1024 * 1024;
/** Non-file fields, and the size of each (a `pipeline` definition or `sources` JSON fits). */
const MAX_FIELDS = 16;
const MAX_FIELD_BYTES = 1024 * 1024;
/** Bytes the type of a file is told from (sniffDocument's window). */
const SNIFF_BYTES = 8 * 1024;

export interface UploadedFile {
  /** The file name the client gave, without any folder part: the document's source name. */
  name: string;
  path: string;
  sha256: string;
  size: number;
}

export interface Upload {
  fields: Record<string, string>;
  files: UploadedFile[];
  /** Removes the temp folder; call once the files are staged (or the request failed). */
  dispose(): Promise<void>;
}

/** @fastify/multipart's limit errors, in the gateway's codes. */
function uploadError(error: unknown): unknown {
  if (isShoalError(error) || typeof error !== 'object' || error === null || !('code' in error)) return error;
  switch (error.code) {
    case 'FST_REQ_FILE_TOO_LARGE':
      return new ShoalError(ErrorCode.INPUT_TOO_LARGE, `an uploaded file is larger than the document limit of ${MAX_DOCUMENT_BYTES} bytes`, { details: { limitBytes: MAX_DOCUMENT_BYTES } });
    case 'FST_FILES_LIMIT':
      return new ShoalError(ErrorCode.INPUT_TOO_LARGE, `an upload holds at most ${MAX_UPLOAD_FILES} files; send more in several requests, or by reference`, { details: { limit: MAX_UPLOAD_FILES } });
    case 'FST_FIELDS_LIMIT':
    case 'FST_PARTS_LIMIT':
      return new ShoalError(ErrorCode.INPUT_TOO_LARGE, `an upload holds at most ${MAX_FIELDS} fields besides its files`, { details: { limit: MAX_FIELDS } });
    case 'FST_PROTO_VIOLATION':
    case 'FST_MP_PREMATURE_CLOSE':
      return new ShoalError(ErrorCode.INVALID_INPUT, `the multipart body is not valid: ${String('message' in error ? error.message : error.code)}`, { cause: error });
    default:
      return error;
  }
}

/** The file name without folders (a client may send `../../x.pdf`), bounded as a record id. */
function fileName(raw: string): string {
  const name = basename(raw.replaceAll('\\', '/')).trim();
  if (name === '' || name === '.' || name === '..') throw new ShoalError(ErrorCode.INVALID_INPUT, 'an uploaded file has no name: send it as -F file=@name.pdf');
  return name.slice(-512);
}

/** Refuses a file of no supported kind (415) or an empty one (422), from its first bytes. */
function checkKind(head: Uint8Array, name: string): void {
  try {
    sniffDocument(head, name);
  } catch (error) {
    if (isShoalError(error) && error.code === ErrorCode.UNSUPPORTED_DOCUMENT) {
      throw new ShoalError(ErrorCode.UNSUPPORTED_MEDIA_TYPE, `${name}: ${error.message}`, { details: { file: name } });
    }
    if (isShoalError(error) && error.code === ErrorCode.DOCUMENT_EMPTY) throw new ShoalError(ErrorCode.INVALID_INPUT, `${name} is empty`, { details: { file: name } });
    throw error;
  }
}

/** Reads a multipart ingest request into fields and temp files; throws 413/415/422 as above. */
export async function readUpload(request: FastifyRequest): Promise<Upload> {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-upload-'));
  const dispose = (): Promise<void> => rm(dir, { recursive: true, force: true });
  const fields: Record<string, string> = {};
  const files: UploadedFile[] = [];
  let total = 0;
  try {
    const parts = request.parts({ limits: { fileSize: MAX_DOCUMENT_BYTES, files: MAX_UPLOAD_FILES, fields: MAX_FIELDS, fieldSize: MAX_FIELD_BYTES, parts: MAX_UPLOAD_FILES + MAX_FIELDS } });
    for await (const part of parts) {
      if (part.type === 'field') {
        if (part.valueTruncated) throw new ShoalError(ErrorCode.INPUT_TOO_LARGE, `field ${part.fieldname.slice(0, 64)} is over ${MAX_FIELD_BYTES} bytes`, { details: { field: part.fieldname.slice(0, 64) } });
        if (Object.hasOwn(fields, part.fieldname)) throw new ShoalError(ErrorCode.INVALID_INPUT, `field ${part.fieldname.slice(0, 64)} is given twice`);
        fields[part.fieldname] = typeof part.value === 'string' ? part.value : String(part.value);
        continue;
      }
      const name = fileName(part.filename);
      const path = join(dir, String(files.length));
      const hash = createHash('sha256');
      let size = 0;
      let head = new Uint8Array(0);
      const tap = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          size += chunk.byteLength;
          total += chunk.byteLength;
          if (total > MAX_UPLOAD_BYTES) {
            done(new ShoalError(ErrorCode.INPUT_TOO_LARGE, `the uploaded files are over ${MAX_UPLOAD_BYTES} bytes together`, { details: { limitBytes: MAX_UPLOAD_BYTES } }));
            return;
          }
          if (head.byteLength < SNIFF_BYTES) head = Buffer.concat([head, chunk.subarray(0, SNIFF_BYTES - head.byteLength)]);
          hash.update(chunk);
          done(null, chunk);
        },
      });
      await pipeline(part.file, tap, createWriteStream(path));
      checkKind(head, name);
      files.push({ name, path, sha256: hash.digest('hex'), size });
    }
    if (files.length === 0) throw new ShoalError(ErrorCode.INVALID_INPUT, 'the multipart ingest request has no file: send one or more with -F file=@name.pdf (or send JSON)');
    return { fields, files, dispose };
  } catch (error) {
    await dispose();
    throw uploadError(error);
  }
}
