export { ParsePool } from './parse-pool.js';
export type { ParsePoolOptions, ThreadLease } from './parse-pool.js';
export type { DocumentBytes, Opened, PageRead, ParseRequest, ParseResponse, WholePage } from './parse-messages.js';
export type { OcrMode, OcrReason } from './pdf-reader.js';
export { sniffDocument, looksLikeText } from './sniff.js';
export type { ImageFormat, Sniffed, SniffedType } from './sniff.js';
export type { Heading } from './text-reader.js';
export { dropPageFurniture, isOwnPageNumber, type FurniturePage } from './page-furniture.js';
