import type JSZip from 'jszip';
import { ErrorCode, isShoalError, ShoalError } from '../../protocol/errors.js';
import { decodeDocumentBytes } from '../encoding.js';
import { tooLarge } from './format.js';
import { zipMembers } from './zip-members.js';

/**
 * A ZIP container (DOCX, PPTX, XLSX, EPUB) read within bounds. A ZIP's sizes are claims: a
 * 100 KB member can inflate to gigabytes, and the sizes in its headers can lie. So the member
 * count is checked from the central directory before jszip lists anything, and every member is
 * inflated as a stream whose bytes are counted as they come out: past a member's or the
 * archive's budget the stream is dropped (paused mid-inflation) and the document fails with
 * DOCUMENT_TOO_LARGE. A damaged archive fails with DOCUMENT_CORRUPT, an encrypted one with
 * DOCUMENT_ENCRYPTED, each naming the format.
 */

export interface ArchiveLimits {
  /** Members in the archive. */
  maxEntries: number;
  /** Inflated bytes of one member read. */
  maxEntryBytes: number;
  /** Inflated bytes of all members read, together. */
  maxTotalBytes: number;
}

export const ARCHIVE_LIMITS: Readonly<ArchiveLimits> = Object.freeze({
  maxEntries: 10_000,
  maxEntryBytes: 64 * 1024 * 1024,
  maxTotalBytes: 256 * 1024 * 1024,
});

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export class ZipArchive {
  readonly #zip: JSZip;
  readonly #label: string;
  readonly #limits: Readonly<ArchiveLimits>;
  #inflated = 0;

  private constructor(zip: JSZip, label: string, limits: Readonly<ArchiveLimits>) {
    this.#zip = zip;
    this.#label = label;
    this.#limits = limits;
  }

  /** `label` names the format in errors ("the DOCX document ..."). */
  static async open(bytes: Uint8Array, label: string, limits: Readonly<ArchiveLimits> = ARCHIVE_LIMITS): Promise<ZipArchive> {
    const members = zipMembers(bytes);
    if (members === null || !members.complete) {
      throw new ShoalError(ErrorCode.DOCUMENT_CORRUPT, `the ${label} is damaged: its ZIP directory cannot be found (a truncated file?)`);
    }
    if (members.declared > limits.maxEntries) throw tooLarge('maxEntries', members.declared, limits.maxEntries, 'ZIP members');
    const { default: JSZipClass } = await import('jszip');
    try {
      return new ZipArchive(await JSZipClass.loadAsync(bytes), label, limits);
    } catch (error) {
      if (/encrypted/i.test(messageOf(error))) throw new ShoalError(ErrorCode.DOCUMENT_ENCRYPTED, `the ${label} is encrypted (password-protected ZIP members)`, { cause: error });
      throw new ShoalError(ErrorCode.DOCUMENT_CORRUPT, `the ${label} is damaged: ${messageOf(error)}`, { cause: error });
    }
  }

  has(name: string): boolean {
    return this.#zip.file(name) !== null;
  }

  /** Every member that is a file, in the archive's order. */
  names(): string[] {
    return Object.values(this.#zip.files)
      .filter((entry) => !entry.dir)
      .map((entry) => entry.name);
  }

  /** A member's bytes, inflated within the budgets; DOCUMENT_CORRUPT when it is missing or damaged. */
  async bytes(name: string): Promise<Uint8Array> {
    const chunks: Buffer[] = [];
    await this.#inflate(name, (chunk) => chunks.push(chunk));
    return Buffer.concat(chunks);
  }

  async #inflate(name: string, onChunk: (chunk: Buffer) => void): Promise<void> {
    const entry = this.#zip.file(name);
    if (entry === null) throw new ShoalError(ErrorCode.DOCUMENT_CORRUPT, `the ${this.#label} is damaged: it has no ${name}`);
    let size = 0;
    try {
      // jszip's stream (readable-stream 2) is not async-iterable: its events are followed instead.
      await new Promise<void>((resolve, reject) => {
        const stream = entry.nodeStream('nodebuffer');
        const stop = (error: unknown): void => {
          // Pausing stops jszip's inflation where it is; nothing more is produced or kept.
          stream.pause();
          stream.removeAllListeners('data');
          reject(error);
        };
        stream.on('data', (chunk: Buffer | string) => {
          const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
          size += buffer.length;
          this.#inflated += buffer.length;
          if (size > this.#limits.maxEntryBytes) return stop(tooLarge('maxEntryBytes', size, this.#limits.maxEntryBytes, `bytes inflated from ${name}`));
          if (this.#inflated > this.#limits.maxTotalBytes) return stop(tooLarge('maxTotalBytes', this.#inflated, this.#limits.maxTotalBytes, 'bytes inflated from the archive'));
          onChunk(buffer);
        });
        stream.on('error', stop);
        stream.on('end', () => resolve());
      });
    } catch (error) {
      if (isShoalError(error)) throw error;
      if (/encrypted/i.test(messageOf(error))) throw new ShoalError(ErrorCode.DOCUMENT_ENCRYPTED, `the ${this.#label} is encrypted (${name} is password-protected)`, { cause: error });
      throw new ShoalError(ErrorCode.DOCUMENT_CORRUPT, `the ${this.#label} is damaged: ${name} cannot be inflated (${messageOf(error)})`, { cause: error });
    }
  }

  /** A member's text (XML, XHTML): its byte order mark or UTF-8, as encoding.ts decides. */
  async text(name: string): Promise<string> {
    return decodeDocumentBytes(await this.bytes(name), null);
  }

  /** The member's text when it exists, else undefined. */
  async optionalText(name: string): Promise<string | undefined> {
    return this.has(name) ? this.text(name) : undefined;
  }

  /**
   * Inflates every member once, counting and keeping nothing: before the archive goes to a
   * library that inflates members itself (mammoth), so whatever it reads is known to fit.
   */
  async checkAll(): Promise<void> {
    for (const name of this.names()) await this.#inflate(name, () => undefined);
  }
}
