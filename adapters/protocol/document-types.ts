/**
 * The document types Shoal reads, named once: the parse stage's `DocumentType`, the wire enum of
 * stored pages (ingest.ts) and the formats registry (adapters/documents/formats/registry.ts, which
 * the compiler holds to one format per name here) all come from this list.
 */
export const DOCUMENT_TYPES = ['pdf', 'text', 'markdown', 'html', 'image', 'docx', 'pptx', 'xlsx', 'epub', 'eml'] as const;

export type DocumentType = (typeof DOCUMENT_TYPES)[number];
