import { dropPageFurniture, ParsePool, type DocumentBytes, type Opened, type PageRead, type ParseRequest, type ParseResponse, type ThreadLease } from '../../adapters/documents/index.js';
import type { Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError, hasErrorCode, isShoalError, toShoalError } from '../../adapters/protocol/errors.js';
import { resolveParseOptions, type DocumentSource, type ParsedDocument, type ParsedPage, type ParseOptions, type ParseOutcome } from './document.js';

/**
 * The parse stage: a document source in, its pages of text out. Type sniffing, decoding and PDF
 * reading run in parse threads (adapters/documents); pages without a usable text layer are
 * rendered there and read by the OCR model through the engine, overlapping with the thread
 * reading the next pages. A bad document never throws: it comes back as a failed outcome with
 * its error code (DOCUMENT_ENCRYPTED, DOCUMENT_CORRUPT, DOCUMENT_EMPTY, DOCUMENT_TOO_LARGE,
 * UNSUPPORTED_DOCUMENT, ...) and a reason.
 */

/** Rendered pages waiting for OCR at once, per reading thread (each is a page-sized PNG in memory). */
const MAX_OCR_IN_FLIGHT = 2;
/** A document with at least this many pages left to read takes on idle parse threads. */
const MIN_PAGES_TO_SHARE = 16;
const DEFAULT_STEP_TIMEOUT_MS = 60_000;

type OpenRequest = Extract<ParseRequest, { type: 'open' }>;

function responseOf<T extends ParseResponse['type']>(response: ParseResponse, type: T): Extract<ParseResponse, { type: T }> {
  if (response.type !== type) throw new ShoalError(ErrorCode.INTERNAL, `parse thread answered ${response.type}, expected ${type}`);
  return response as Extract<ParseResponse, { type: T }>;
}

function sourceBytes(source: DocumentSource): DocumentBytes {
  if (source.bytes !== undefined) return { bytes: source.bytes };
  if (source.text !== undefined) return { text: source.text };
  const path = source.path ?? source.uri;
  if (path.length === 0) throw new ShoalError(ErrorCode.INVALID_INPUT, 'a document source needs a path, bytes or text');
  return { path };
}

/**
 * The engine's answer about an image file as a document failure: what it cannot decode is a
 * damaged document, what is over its pixel limit a too large one, as for PDFs. So a file that
 * changed into one of these has its old rows removed like any other damaged document.
 */
function imageFailure(error: unknown): unknown {
  if (!isShoalError(error)) return error;
  if (error.code === ErrorCode.INVALID_INPUT) return new ShoalError(ErrorCode.DOCUMENT_CORRUPT, `the image cannot be read: ${error.message}`, { cause: error });
  if (error.code === ErrorCode.INPUT_TOO_LARGE) return new ShoalError(ErrorCode.DOCUMENT_TOO_LARGE, `the image is too large: ${error.message}`, { cause: error });
  return error;
}

export class DocumentParser {
  readonly #engine: Engine;
  readonly #options: Readonly<ParseOptions>;
  readonly #pool: ParsePool;

  constructor(engine: Engine, options: Partial<ParseOptions> = {}) {
    this.#engine = engine;
    this.#options = resolveParseOptions(options);
    const poolOptions: { threads?: number; memoryMb?: number } = {};
    if (this.#options.threads !== undefined) poolOptions.threads = this.#options.threads;
    if (this.#options.threadMemoryMb !== undefined) poolOptions.memoryMb = this.#options.threadMemoryMb;
    this.#pool = new ParsePool(poolOptions);
  }

  get options(): Readonly<ParseOptions> {
    return this.#options;
  }

  /** Reads one document. Never throws for a bad document: failures are outcomes with a code. */
  async parse(source: DocumentSource): Promise<ParseOutcome> {
    try {
      return { ok: true, document: await this.#parse(source) };
    } catch (error) {
      const shoal = toShoalError(error);
      return { ok: false, source: source.uri, code: shoal.code, reason: shoal.message };
    }
  }

  /** Stops the parse threads. Documents still being read fail with UNAVAILABLE. */
  async close(): Promise<void> {
    await this.#pool.close();
  }

  /**
   * One step on a parse thread, bounded in time: a document that makes pdfjs loop or crawl must
   * not hold its thread forever. On a timeout the thread is stopped (the slot restarts one).
   */
  async #request(lease: ThreadLease, body: ParseRequest): Promise<ParseResponse> {
    const limit = this.#options.stepTimeoutMs ?? DEFAULT_STEP_TIMEOUT_MS;
    await lease.ready();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const step = body.type === 'page' ? `reading page ${body.page}` : body.type === 'open' ? 'opening the document' : 'closing the document';
        reject(new ShoalError(ErrorCode.TIMEOUT, `${step} took longer than ${limit} ms; the parse thread was stopped`));
      }, limit);
    });
    try {
      return await Promise.race([lease.request(body), timeout]);
    } catch (error) {
      // A page over a limit may leave pdfjs mid-page (its text stream cut short), where it never
      // finishes and the document cannot be closed: that thread is stopped too.
      if (hasErrorCode(error, ErrorCode.TIMEOUT) || (body.type === 'page' && hasErrorCode(error, ErrorCode.DOCUMENT_TOO_LARGE))) await lease.terminate();
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  #checkSignal(): void {
    if (this.#options.signal?.aborted === true) throw new ShoalError(ErrorCode.CANCELLED, 'parsing was cancelled');
  }

  async #parse(source: DocumentSource): Promise<ParsedDocument> {
    this.#checkSignal();
    const lease = await this.#pool.acquire();
    let pdfOpen = false;
    try {
      const open: OpenRequest = {
        type: 'open',
        key: lease.key,
        source: sourceBytes(source),
        name: source.path ?? source.uri,
        maxBytes: this.#options.maxBytes,
        maxPages: this.#options.maxPages,
      };
      const opened = responseOf(await this.#request(lease, open), 'opened');
      pdfOpen = opened.kind === 'pdf';
      const document: ParsedDocument = { source: source.uri, type: 'text', contentHash: opened.contentHash, pages: [], bytes: opened.bytes };
      if (source.id !== undefined) document.id = source.id;
      if (opened.title !== undefined) document.title = opened.title;
      switch (opened.kind) {
        case 'whole':
          document.type = opened.documentType;
          document.pages = opened.pages.map((page) => ({ page: page.page, text: page.text, ocr: false, headings: page.headings }));
          for (const page of document.pages) this.#options.onPage?.({ source: source.uri, page: page.page, ocr: false });
          break;
        case 'image':
          document.type = 'image';
          document.pages = await this.#imagePages(source.uri, opened);
          break;
        case 'pdf':
          document.type = 'pdf';
          document.pages = await this.#pdfPages(source.uri, lease, opened, open);
          // Before the title is taken from the first heading: a running head is not the title.
          if (this.#options.furniture === 'drop') document.pages = dropPageFurniture(document.pages);
          document.title ??= document.pages[0]?.headings?.[0]?.text;
          if (document.title === undefined) delete document.title;
          break;
      }
      this.#requireSomeText(document);
      return document;
    } finally {
      // The thread may be gone (a crash); closing is then moot, and the document has failed already.
      if (pdfOpen) await lease.request({ type: 'close', key: lease.key }).catch(() => undefined);
      lease.release();
    }
  }

  /**
   * A document with no text on any page is empty (DOCUMENT_EMPTY): it fails alone and keeps the
   * rows an earlier run indexed. Under `ocr: never` some empty pages are expected (a scan inside a
   * text PDF), but a document with no text at all (an image file, a fully scanned PDF) was
   * reported indexed with 0 chunks, and that replaced its earlier OCR'd rows with nothing.
   */
  #requireSomeText(document: ParsedDocument): void {
    if (document.pages.some((page) => page.text.trim().length > 0)) return;
    const pages = document.pages.length === 1 ? 'its page' : `any of its ${document.pages.length} pages`;
    if (this.#options.ocr !== 'never') throw new ShoalError(ErrorCode.DOCUMENT_EMPTY, `no text found on ${pages}, in the text layer or by OCR`);
    const unread = document.pages.some((page) => page.ocrReason !== undefined);
    throw new ShoalError(
      ErrorCode.DOCUMENT_EMPTY,
      unread ? `no text layer on ${pages}, and OCR, which would read it, is off (ocr: never; --ocr auto reads it)` : `no text found on ${pages}`,
    );
  }

  async #ocr(png: Uint8Array): Promise<string> {
    const signal = this.#options.signal;
    // Bulk, not the interactive lane a one-item request would default to: that lane's session gets
    // half the cores (one of two here), and OCR of a page is batch work (bench/ocr.ts --priority).
    const result = await this.#engine.extract({ model: this.#options.ocrModel, items: [{ image: png }], priority: 'bulk' }, signal === undefined ? {} : { signal });
    return result.items[0]?.text ?? '';
  }

  /** An image file's pages: one, or each page of a multi-page TIFF, OCR'd in turn. */
  async #imagePages(uri: string, opened: Extract<Opened, { kind: 'image' }>): Promise<ParsedPage[]> {
    const images = [opened.image, ...(opened.morePages ?? [])];
    const pages: ParsedPage[] = [];
    for (const [at, image] of images.entries()) {
      const page = at + 1;
      if (this.#options.ocr === 'never') {
        this.#options.onPage?.({ source: uri, page, ocr: false });
        pages.push({ page, text: '', ocr: false, ocrReason: 'image-file' });
        continue;
      }
      const text = await this.#ocr(image).catch((error: unknown) => {
        throw imageFailure(error);
      });
      this.#options.onPage?.({ source: uri, page, ocr: true });
      pages.push({ page, text, ocr: true, ocrReason: 'image-file' });
    }
    return pages;
  }

  async #finishPage(uri: string, read: PageRead): Promise<ParsedPage> {
    const page: ParsedPage = { page: read.page, text: read.text, ocr: false, headings: read.headings };
    if (read.ocrReason !== null) page.ocrReason = read.ocrReason;
    if (read.png !== undefined) {
      const text = await this.#ocr(read.png);
      // A page sent to OCR for its images keeps its text layer when OCR reads nothing there.
      if (text.trim().length > 0 || read.text.trim().length === 0) {
        page.text = text;
        page.ocr = true;
        page.headings = [];
      }
    }
    this.#options.onPage?.({ source: uri, page: page.page, ocr: page.ocr });
    return page;
  }

  /**
   * Reads the pages of an open PDF. A long document recruits parse threads that fall idle while it
   * is read (the same bytes opened there too): threads take the next unread page in turn.
   */
  async #pdfPages(uri: string, lease: ThreadLease, opened: Extract<Opened, { kind: 'pdf' }>, open: OpenRequest): Promise<ParsedPage[]> {
    const count = opened.pageCount;
    const pages: Promise<ParsedPage>[] = [];
    let next = 1;
    const helpers: Promise<void>[] = [];
    const recruit = (): void => {
      if (count - next < MIN_PAGES_TO_SHARE) return;
      const helper = this.#pool.tryAcquire();
      if (helper !== null) helpers.push(this.#help(helper, open, opened.contentHash, read));
    };
    const read = async (reader: ThreadLease, lead: boolean): Promise<void> => {
      const ocrInFlight = new Set<Promise<ParsedPage>>();
      while (next <= count) {
        this.#checkSignal();
        if (lead) recruit();
        const number = next++;
        const response = responseOf(await this.#request(reader, { type: 'page', key: reader.key, page: number, ocr: this.#options.ocr, dpi: this.#options.ocrDpi }), 'page');
        const page = this.#finishPage(uri, response);
        // Marked as handled now: a failure surfaces through Promise.all below, not as an unhandled rejection.
        page.catch(() => undefined);
        pages[number - 1] = page;
        if (response.png !== undefined) {
          ocrInFlight.add(page);
          void page.finally(() => ocrInFlight.delete(page)).catch(() => undefined);
          if (ocrInFlight.size >= MAX_OCR_IN_FLIGHT) await Promise.race(ocrInFlight);
        }
      }
    };
    await read(lease, true);
    await Promise.all(helpers);
    return Promise.all(pages);
  }

  /** A helper thread opens the same document and reads pages until none are left. */
  async #help(helper: ThreadLease, open: OpenRequest, contentHash: string, read: (reader: ThreadLease, lead: boolean) => Promise<void>): Promise<void> {
    let opened = false;
    try {
      try {
        const response = responseOf(await this.#request(helper, { ...open, key: helper.key }), 'opened');
        opened = response.kind === 'pdf';
        // The file changed between the two reads: leave the pages to the first thread.
        if (!opened || response.contentHash !== contentHash) return;
      } catch {
        // A helper that cannot open the document only means no help; the first thread reads on.
        return;
      }
      await read(helper, false);
    } finally {
      if (opened) await helper.request({ type: 'close', key: helper.key }).catch(() => undefined);
      helper.release();
    }
  }
}
