// The ingest stack a TypeScript team assembles from LangChain.js, written the way its documentation
// shows: PDFLoader (pdf-parse) for PDFs, Documents built from records, RecursiveCharacterTextSplitter
// with a token length function (the encoder's own tokenizer, so chunk sizes are in the same tokens
// as Shoal's), HuggingFaceTransformersEmbeddings (transformers.js) and the LanceDB vector store.
// Plain JavaScript on purpose: this folder has its own node_modules (npm ci --prefix
// bench/peers/langchain), which Shoal's type check does not see.
//
//   node bench/peers/langchain/ingest.mjs --pdfs DIR --records FILE.jsonl --index DIR --model DIR
//        [--chunk-size 200] [--chunk-overlap 32]
//
// Prints one JSON line: documents, PDF files loaded and failed (with the error), pages with text,
// chunks, seconds per phase and in all.
import { readdir, readFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { PDFLoader } from '@langchain/community/document_loaders/fs/pdf';
import { HuggingFaceTransformersEmbeddings } from '@langchain/community/embeddings/huggingface_transformers';
import { LanceDB } from '@langchain/community/vectorstores/lancedb';
import { Document } from '@langchain/core/documents';
import { RecursiveCharacterTextSplitter } from '@langchain/textsplitters';
import { AutoTokenizer, env } from '@huggingface/transformers';

const { values: args } = parseArgs({
  options: {
    pdfs: { type: 'string' },
    records: { type: 'string' },
    index: { type: 'string' },
    model: { type: 'string' },
    'chunk-size': { type: 'string', default: '200' },
    'chunk-overlap': { type: 'string', default: '32' },
  },
});
if (!args.index || !args.model) throw new Error('--index and --model are required');

// A local model folder, as transformers.js documents offline use: localModelPath + the folder name.
env.localModelPath = dirname(args.model);
env.allowRemoteModels = false;
const modelName = basename(args.model);

const started = performance.now();
const phases = {};
const timed = async (name, work) => {
  const at = performance.now();
  const result = await work();
  phases[name] = Number(((performance.now() - at) / 1000).toFixed(3));
  return result;
};

const documents = [];
const failedFiles = [];
let pdfFiles = 0;
await timed('load', async () => {
  if (args.pdfs) {
    const names = (await readdir(args.pdfs)).filter((name) => name.toLowerCase().endsWith('.pdf')).sort();
    for (const name of names) {
      pdfFiles++;
      try {
        // One Document per page (splitPages, the default).
        documents.push(...(await new PDFLoader(join(args.pdfs, name)).load()));
      } catch (error) {
        failedFiles.push({ file: name, error: String(error instanceof Error ? error.message : error).slice(0, 200) });
      }
    }
  }
  if (args.records) {
    for (const line of (await readFile(args.records, 'utf8')).split('\n')) {
      if (line.trim() === '') continue;
      const record = JSON.parse(line);
      documents.push(new Document({ pageContent: record.text, metadata: { source: String(record.id) } }));
    }
  }
});
const pdfPages = documents.filter((document) => document.metadata?.loc?.pageNumber !== undefined);
const pagesWithText = pdfPages.filter((document) => document.pageContent.trim() !== '').length;

const tokenizer = await AutoTokenizer.from_pretrained(modelName);
const tokens = (text) => tokenizer.encode(text, { add_special_tokens: false }).length;
const splitter = new RecursiveCharacterTextSplitter({
  chunkSize: Number(args['chunk-size']),
  chunkOverlap: Number(args['chunk-overlap']),
  lengthFunction: tokens,
});
const chunks = await timed('split', () => splitter.splitDocuments(documents));

// The PDF loader's metadata holds nested objects (pdf.info, pdf.metadata) whose fields differ from
// file to file, which LanceDB cannot make one table schema of; a user keeps the flat fields.
const stored = chunks.map((chunk) => new Document({ pageContent: chunk.pageContent, metadata: { source: String(chunk.metadata.source ?? ''), page: Number(chunk.metadata.loc?.pageNumber ?? 0) } }));

const embeddings = new HuggingFaceTransformersEmbeddings({ model: modelName });
await timed('embed_and_write', () => LanceDB.fromDocuments(stored, embeddings, { uri: args.index, tableName: 'vectors' }));

const seconds = (performance.now() - started) / 1000;
process.stdout.write(
  `${JSON.stringify({
    peer: 'langchain',
    records: documents.length - pdfPages.length,
    pdf_files: pdfFiles,
    pdf_files_failed: failedFiles,
    pdf_pages: pdfPages.length,
    pdf_pages_with_text: pagesWithText,
    chunks: stored.length,
    phases,
    seconds: Number(seconds.toFixed(3)),
  })}\n`,
);
