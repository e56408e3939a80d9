import { createHash } from 'node:crypto';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { serveThread, type HandlerResult } from '../support/thread-rpc.js';
import { readRegularFile } from '../sources/checked-file.js';
import { tooLarge, type PagedDocument } from './formats/format.js';
import { formatOf } from './formats/registry.js';
import type { DocumentBytes, Opened, ParseRequest, ParseResponse, PageRead } from './parse-messages.js';
import { sniffDocument } from './sniff.js';

/**
 * Parse thread: reads files, sniffs their type and reads them with their format
 * (formats/registry.ts): whole, or (PDFs) opened once and read page by page. Everything
 * CPU-heavy about documents happens here, off the main thread.
 */

const openDocuments = new Map<number, PagedDocument>();

async function readBytes(source: DocumentBytes, maxBytes: number): Promise<Uint8Array> {
  if ('bytes' in source) return source.bytes;
  if ('text' in source) return new TextEncoder().encode(source.text);
  // Type and size checked on the opened file before reading, so an oversized file is never loaded into memory.
  return readRegularFile(source.path, { maxBytes, tooLarge: (size) => tooLarge('maxBytes', size, maxBytes, 'bytes') });
}

async function open(request: Extract<ParseRequest, { type: 'open' }>): Promise<HandlerResult<Opened>> {
  const bytes = await readBytes(request.source, request.maxBytes);
  if (bytes.length > request.maxBytes) throw tooLarge('maxBytes', bytes.length, request.maxBytes, 'bytes');
  const contentHash = createHash('sha256').update(bytes).digest('hex');
  // Inline text records are text, whatever their bytes look like.
  const sniffed = 'text' in request.source ? { type: 'text' as const } : sniffDocument(bytes, request.name);
  const opened = await formatOf(sniffed.type).open(bytes, { name: request.name, sniffed, maxBytes: request.maxBytes, maxPages: request.maxPages });
  if (opened.paged !== undefined) openDocuments.set(request.key, opened.paged);
  const body: Opened = { type: 'opened', contentHash, bytes: bytes.length, ...opened.body };
  return opened.transfer === undefined ? { body } : { body, transfer: opened.transfer };
}

async function page(request: Extract<ParseRequest, { type: 'page' }>): Promise<HandlerResult<PageRead>> {
  const open = openDocuments.get(request.key);
  if (open === undefined) throw new ShoalError(ErrorCode.INTERNAL, `no open document for key ${request.key}`);
  return open.read(request);
}

async function close(key: number): Promise<HandlerResult<ParseResponse>> {
  const open = openDocuments.get(key);
  openDocuments.delete(key);
  if (open !== undefined) await open.close();
  return { body: { type: 'closed' } };
}

async function handle(request: ParseRequest): Promise<HandlerResult<ParseResponse>> {
  switch (request.type) {
    case 'open':
      return open(request);
    case 'page':
      return page(request);
    case 'close':
      return close(request.key);
  }
}

serveThread<ParseRequest, ParseResponse>(handle);
